package ferrycli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/httpapi"
)

// apiURLFile is the file in the state directory where `ferry run` writes its HTTP API's
// URL once it listens (http.address may name port 0), and which `ferry status` reads when
// given no --url. It is removed at a clean stop.
const apiURLFile = "http.url"

// listenAPI binds rc's [http] address when the API is enabled (nil listener when it is
// not), before anything else of the run starts: a taken port fails the run before any
// connector has run. Port 0 picks a free port.
func listenAPI(rc *config.Runtime) (net.Listener, error) {
	if !rc.HTTP.Enabled {
		return nil, nil
	}
	ln, err := net.Listen("tcp", rc.HTTP.Address)
	if err != nil {
		return nil, fmt.Errorf("HTTP API: listen on http.address %s: %w", rc.HTTP.Address, err)
	}
	return ln, nil
}

// apiURL is the URL of the API listening on ln.
func apiURL(rc *config.Runtime, ln net.Listener) string {
	scheme := "http"
	if rc.HTTP.TLS.Enabled {
		scheme = "https"
	}
	return scheme + "://" + ln.Addr().String()
}

// serveAPI serves the HTTP API of rc's [http] section over rt on ln (from listenAPI; nil:
// the API is disabled and a no-op is returned), writes its URL to stateDir/http.url, and
// returns the URL and the function that stops it (within a second; call it once, after
// rt.Stop: the API keeps answering while the runtime stops, so ctx ending does not stop
// it) and removes the file. version is Ferry's (orVersion). Errors: the API's
// configuration (checked before by prepareStart), or the file cannot be written; ln is
// closed on error. store may be nil (the configs routes then answer 500).
func serveAPI(ctx context.Context, rc *config.Runtime, ln net.Listener, stateDir string, rt *connect.Runtime, store httpapi.ConfigStore, version string, health func() error, log *slog.Logger) (url string, stop func(), err error) {
	if ln == nil {
		log.Info("HTTP API disabled")
		return "", func() {}, nil
	}
	srv, err := httpapi.New(httpapi.Options{Runtime: rt, Configs: store, HTTP: rc.HTTP, Version: version,
		Started: time.Now(), Health: health, Logger: log.With("component", "http")})
	if err != nil {
		_ = ln.Close()
		return "", nil, err
	}
	url = apiURL(rc, ln)
	urlFile := filepath.Join(stateDir, apiURLFile)
	if err := os.WriteFile(urlFile, []byte(url+"\n"), 0o644); err != nil {
		_ = ln.Close()
		return "", nil, fmt.Errorf("HTTP API: write its URL: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(sctx, ln); err != nil {
			log.Error("HTTP API stopped", "error", err)
		}
	}()
	log.Info("HTTP API started", "address", ln.Addr().String(), "url", url, "url_file", urlFile, "api_key", rc.HTTP.APIKey != "")
	return url, func() {
		cancel()
		<-done
		if err := os.Remove(urlFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("HTTP API: cannot remove its URL file", "file", urlFile, "error", err)
		}
	}, nil
}

// readAPIURL returns the URL a running `ferry run` wrote to stateDir/http.url.
func readAPIURL(stateDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, apiURLFile))
	if err != nil {
		return "", err
	}
	url := strings.TrimSpace(string(b))
	if url == "" {
		return "", fmt.Errorf("%s is empty", filepath.Join(stateDir, apiURLFile))
	}
	return url, nil
}

// stateDir is the runtime's state directory (state.path, else connect's default).
func stateDir(rc *config.Runtime) string {
	if rc.State.Path != "" {
		return rc.State.Path
	}
	return connect.DefaultStateDir
}
