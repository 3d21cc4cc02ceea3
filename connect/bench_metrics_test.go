package connect_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/metrics"
)

// BenchmarkSinkPipeline (package connect) measures the pipeline with its metrics
// scraped when FERRY_BENCH_METRICS=1: this hook serves metrics.Handler of the runtime
// on a loopback HTTP server and GETs it every 100 ms, as Prometheus would, until the
// measurement ends. It lives in the external test package because connect/metrics
// imports connect.
func init() {
	connect.BenchScrape = func(rt *connect.Runtime) func() error {
		srv := httptest.NewServer(metrics.Handler(rt))
		client := srv.Client()
		done := make(chan struct{})
		var wg sync.WaitGroup
		var failed error
		wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for failed == nil {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				failed = scrapeOnce(client, srv.URL)
			}
		})
		return func() error {
			close(done)
			wg.Wait()
			client.CloseIdleConnections()
			srv.Close()
			return failed
		}
	}
}

func scrapeOnce(c *http.Client, url string) error {
	res, err := c.Get(url)
	if err != nil {
		return fmt.Errorf("metrics scrape: %w", err)
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return fmt.Errorf("metrics scrape: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("metrics scrape: %s", res.Status)
	}
	return nil
}
