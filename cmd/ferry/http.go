package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/httpapi"
)

// startAPI starts the HTTP API of rc's [http] section over rt when it is enabled, and
// returns its URL and the function that stops it (within a second; call it once, after rt.Stop: the
// API keeps answering while the runtime stops, so ctx ending does not stop it). A
// disabled API returns a no-op. version is Ferry's (versionString). Errors: the API's configuration (a non-loopback http.address
// without an api_key, CORS, TLS files) or the address cannot be listened on. store may
// be nil (the configs routes then answer 500).
func startAPI(ctx context.Context, rc *config.Runtime, rt *connect.Runtime, store httpapi.ConfigStore, version string, health func() error, log *slog.Logger) (url string, stop func(), err error) {
	if !rc.HTTP.Enabled {
		log.Info("HTTP API disabled")
		return "", func() {}, nil
	}
	srv, err := httpapi.New(httpapi.Options{Runtime: rt, Configs: store, HTTP: rc.HTTP, Version: version,
		Started: time.Now(), Health: health, Logger: log.With("component", "http")})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", rc.HTTP.Address)
	if err != nil {
		return "", nil, fmt.Errorf("HTTP API: listen on http.address %s: %w", rc.HTTP.Address, err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(sctx, ln); err != nil {
			log.Error("HTTP API stopped", "error", err)
		}
	}()
	scheme := "http"
	if rc.HTTP.TLS.Enabled {
		scheme = "https"
	}
	url = scheme + "://" + ln.Addr().String()
	log.Info("HTTP API started", "address", ln.Addr().String(), "url", url, "api_key", rc.HTTP.APIKey != "")
	return url, func() {
		cancel()
		<-done
	}, nil
}
