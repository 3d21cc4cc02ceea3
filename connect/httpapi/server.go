package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/httpapi/ui"
	"github.com/ferryio/ferry/connect/metrics"
)

// Runtime is what the API reads and drives; *connect.Runtime implements it. Its methods
// must be safe for concurrent use (handlers run concurrently).
type Runtime interface {
	Status() []connect.Status
	Connector(kind, key string) (connect.Status, bool)
	Configured() (sinks, sources int)
	Restart(ctx context.Context, kind, key string) error
	StopConnector(ctx context.Context, kind, key string) error
	Pause(kind, key string) error
	Resume(kind, key string) error
	Offsets(ctx context.Context, key string) ([]connect.PartitionOffsets, error)
	// SinkPartitions completes a sink's status with every partition of its topics and
	// their offsets as Iggy has them (connect.Runtime.SinkPartitions).
	SinkPartitions(ctx context.Context, st connect.Status) ([]connect.PartitionStatus, error)
	SetOffsets(ctx context.Context, key string, changes []connect.OffsetChange) error
}

// ConfigStore holds every version of every connector config (connect/provider's Local and
// HTTP implement it). An error wrapping provider.ErrConfigNotFound means no such version (answered
// 500 *_config_not_found, as upstream), config.ErrInvalidConfig a body that does not make a
// valid config (400 invalid_configuration); anything else is 500 error. (bind.go binds
// those sentinels.) Its methods must be safe for concurrent use.
type ConfigStore interface {
	SinkConfigs(key string) ([]*config.Sink, error)
	SinkConfig(key string, version uint64) (*config.Sink, error)
	// CreateSink stores body (a CreateSinkConfig JSON object) as the next version of key,
	// without activating it.
	CreateSink(key string, body []byte) (*config.Sink, error)
	// DeleteSinkConfig deletes one version; nil deletes the active one.
	DeleteSinkConfig(key string, version *uint64) error
	SetActiveSink(key string, version uint64) error

	SourceConfigs(key string) ([]*config.Source, error)
	SourceConfig(key string, version uint64) (*config.Source, error)
	CreateSource(key string, body []byte) (*config.Source, error)
	DeleteSourceConfig(key string, version *uint64) error
	SetActiveSource(key string, version uint64) error
}

// Options configure a Server.
type Options struct {
	// Runtime is the running connect.Runtime. Required.
	Runtime Runtime
	// Configs serves the /…/configs routes; nil: the routes that need it answer 500
	// (404 first when the connector is unknown), as with a provider that fails.
	Configs ConfigStore
	// HTTP is the [http] section of config.toml: address, api_key, cors, metrics, tls.
	// Enabled is not read: the caller decides whether to build a Server.
	HTTP config.HTTP
	// Version is Ferry's version, reported by /stats ("" = "unknown").
	Version string
	// Started is when the runtime started (/stats run_time, start_time); zero = when New
	// was called.
	Started time.Time
	// Logger receives the server's logs; nil = slog.Default().
	Logger *slog.Logger
	// Health, when set, is asked by GET /health: an error makes it answer 503
	// {"status":"unhealthy","reason":…} (`ferry run --embedded` passes the embedded
	// server's storage fault: a full disk, a read-only or vanished data dir).
	Health func() error
	// Limits bound Serve's connections; zero fields: DefaultLimits.
	Limits Limits
}

// Server is the HTTP API. Build it with New; serve it with Serve or ListenAndServe.
type Server struct {
	rt      Runtime
	configs ConfigStore
	cfg     config.HTTP
	version string
	started time.Time
	log     *slog.Logger
	health  func() error
	tls     *tls.Config
	handler http.Handler
	probe   *probe
	limits  Limits

	mu   sync.Mutex
	addr net.Addr
}

// New checks opts and builds the server; it does not listen yet. Errors: no Runtime; an
// http.address that is not loopback while http.api_key is empty; an invalid
// [http.cors] entry; unreadable TLS files; a metrics endpoint that is not a path or
// clashes with a route.
func New(opts Options) (*Server, error) {
	if opts.Runtime == nil {
		return nil, errors.New("httpapi: Options.Runtime is required")
	}
	s := &Server{rt: opts.Runtime, configs: opts.Configs, cfg: opts.HTTP, version: opts.Version,
		started: opts.Started, log: opts.Logger, health: opts.Health, probe: newProbe(procRoot), limits: opts.Limits.withDefaults()}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.started.IsZero() {
		s.started = time.Now()
	}
	if s.version == "" {
		s.version = "unknown"
	}
	if err := s.build(); err != nil {
		return nil, err
	}
	return s, nil
}

// Validate returns the error New would return for the [http] section h (every check but
// the Runtime's), without a runtime and without listening: `ferry check` and `ferry run`
// call it before anything starts.
func Validate(h config.HTTP) error {
	s := &Server{cfg: h, log: slog.New(slog.DiscardHandler)}
	return s.build()
}

// build checks s.cfg and builds the handler and the TLS config.
func (s *Server) build() error {
	if s.cfg.APIKey == "" && !loopback(s.cfg.Address) {
		return fmt.Errorf("httpapi: http.address %q is not a loopback address and http.api_key is empty: set an api_key, or listen on 127.0.0.1, ::1 or localhost", s.cfg.Address)
	}
	if s.cfg.TLS.Enabled {
		cert, err := tls.LoadX509KeyPair(s.cfg.TLS.CertFile, s.cfg.TLS.KeyFile)
		if err != nil {
			return fmt.Errorf("httpapi: http.tls: load cert_file %s and key_file %s: %w", s.cfg.TLS.CertFile, s.cfg.TLS.KeyFile, err)
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	mux, err := s.routes()
	if err != nil {
		return err
	}
	// From the outside in: the keyless Host check, CORS (a preflight ends there), the api
	// key, the keyless Origin and body checks, the routes.
	keyless := s.cfg.APIKey == ""
	g := newGuard(s)
	var h http.Handler = mux
	if keyless {
		h = s.checkOrigin(g, h)
	}
	h = s.authorize(h)
	if s.cfg.CORS.Enabled {
		c, err := newCORS(s.cfg.CORS)
		if err != nil {
			return err
		}
		h = c.wrap(h)
	}
	if keyless {
		h = s.checkHost(g, h)
	}
	s.handler = h
	return nil
}

// loopback reports whether a listen address binds to loopback only: a host of
// 127.0.0.0/8, ::1 or "localhost". An empty host (":8081") binds every interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Handler returns the API's handler (authorization and CORS included), for embedding
// the API in another server.
func (s *Server) Handler() http.Handler { return s.handler }

// Addr returns the address the server listens on once Serve has been called, else the
// configured http.address.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addr != nil {
		return s.addr.String()
	}
	return s.cfg.Address
}

// ListenAndServe listens on http.address and serves until ctx ends (see Serve).
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Address)
	if err != nil {
		return fmt.Errorf("httpapi: listen on http.address %s: %w", s.cfg.Address, err)
	}
	return s.Serve(ctx, ln)
}

// shutdownGrace bounds the graceful part of a stop: requests in flight get this long.
const shutdownGrace = time.Second

// Serve answers requests on ln (with TLS when [http.tls] is enabled), within the
// server's Limits, until ctx ends, then shuts down: requests in flight get a second to
// finish, then every connection is closed. It closes ln and returns nil after a stop by ctx, or the listener's error.
// Request contexts do not end with ctx: a restart or stop that a request started runs to
// its end (bounded by the connector's shutdown_timeout) even when Serve has returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	s.addr = ln.Addr()
	s.mu.Unlock()
	// The cap counts TCP connections, below TLS: a handshake never finished holds a slot
	// only until ReadHeaderTimeout.
	ln = newCapListener(ln, s.limits.MaxConns, s.log)
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.limits.ReadHeaderTimeout,
		ReadTimeout:       s.limits.ReadTimeout,
		WriteTimeout:      s.limits.WriteTimeout,
		IdleTimeout:       s.limits.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			_ = hs.Close()
		}
	}()
	err := hs.Serve(ln)
	close(done)
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// apiKeyHeader is the header carrying http.api_key.
const apiKeyHeader = "api-key"

// public reports whether a request needs no api key: "/" and "/health" (as upstream),
// and the status page's static files (the page then sends the key from the browser).
func public(r *http.Request) bool {
	p := r.URL.Path
	if p == "/" || p == "/health" {
		return true
	}
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && (p == "/ui" || strings.HasPrefix(p, "/ui/"))
}

// authorize answers 401 (empty body, as upstream) to a request without the api key. The
// keys are compared as SHA-256 sums in constant time, so neither the key's bytes nor its
// length show in the timing.
func (s *Server) authorize(next http.Handler) http.Handler {
	if s.cfg.APIKey == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.APIKey.Reveal()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !public(r) {
			got := sha256.Sum256([]byte(r.Header.Get(apiKeyHeader)))
			if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// routes builds the mux of every route (docs/http-api.md).
func (s *Server) routes() (mux *http.ServeMux, err error) {
	mux = http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("Connector Runtime API"))
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		if s.health != nil {
			if err := s.health(); err != nil {
				s.writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unhealthy", "reason": err.Error()})
				return
			}
		}
		s.writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
	})
	mux.HandleFunc("GET /stats", s.getStats)
	for _, kind := range []string{connect.KindSink, connect.KindSource} {
		s.connectorRoutes(mux, kind)
	}
	mux.HandleFunc("GET /sinks/{key}/offsets", s.getOffsets)
	mux.HandleFunc("PUT /sinks/{key}/offsets", s.putOffsets)
	mux.HandleFunc("POST /sinks/{key}/pause", s.pause)
	mux.HandleFunc("POST /sinks/{key}/resume", s.resume)
	mux.HandleFunc("POST /reload", s.reload)
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	mux.Handle("GET /ui/", http.StripPrefix("/ui", ui.Handler()))
	if s.cfg.Metrics.Enabled {
		ep := s.cfg.Metrics.Endpoint
		if !strings.HasPrefix(ep, "/") || strings.ContainsAny(ep, "{} ") {
			return nil, fmt.Errorf("httpapi: http.metrics.endpoint %q must be a path starting with /", ep)
		}
		defer func() {
			if p := recover(); p != nil {
				mux, err = nil, fmt.Errorf("httpapi: http.metrics.endpoint %q clashes with a route: %v", ep, p)
			}
		}()
		mux.Handle("GET "+ep, metrics.Handler(s.rt))
	}
	return mux, nil
}

// connectorRoutes adds the routes Iggy has for both kinds, and Ferry's status, stop and
// restart.
func (s *Server) connectorRoutes(mux *http.ServeMux, kind string) {
	base := "/" + kind + "s"
	mux.HandleFunc("GET "+base, func(w http.ResponseWriter, r *http.Request) { s.listConnectors(w, r, kind) })
	mux.HandleFunc("GET "+base+"/{key}", func(w http.ResponseWriter, r *http.Request) { s.getConnector(w, r, kind) })
	mux.HandleFunc("GET "+base+"/{key}/transforms", func(w http.ResponseWriter, r *http.Request) { s.getTransforms(w, r, kind) })
	mux.HandleFunc("GET "+base+"/{key}/status", func(w http.ResponseWriter, r *http.Request) { s.getStatus(w, r, kind) })
	mux.HandleFunc("POST "+base+"/{key}/restart", func(w http.ResponseWriter, r *http.Request) { s.restart(w, r, kind) })
	mux.HandleFunc("POST "+base+"/{key}/stop", func(w http.ResponseWriter, r *http.Request) { s.stop(w, r, kind) })

	mux.HandleFunc("GET "+base+"/{key}/configs", func(w http.ResponseWriter, r *http.Request) { s.listConfigs(w, r, kind) })
	mux.HandleFunc("POST "+base+"/{key}/configs", func(w http.ResponseWriter, r *http.Request) { s.createConfig(w, r, kind) })
	mux.HandleFunc("DELETE "+base+"/{key}/configs", func(w http.ResponseWriter, r *http.Request) { s.deleteConfig(w, r, kind) })
	mux.HandleFunc("GET "+base+"/{key}/configs/{version}", func(w http.ResponseWriter, r *http.Request) { s.getConfig(w, r, kind) })
	mux.HandleFunc("GET "+base+"/{key}/configs/active", func(w http.ResponseWriter, r *http.Request) { s.getActiveConfig(w, r, kind) })
	mux.HandleFunc("PUT "+base+"/{key}/configs/active", func(w http.ResponseWriter, r *http.Request) { s.setActiveConfig(w, r, kind) })
	mux.HandleFunc("GET "+base+"/{key}/configs/plugin", func(w http.ResponseWriter, r *http.Request) { s.getPluginConfig(w, r, kind) })
}
