// Package providertest is a connector config API for tests: a real HTTP server on a
// loopback TCP port that answers the requests of Iggy's http config provider with the
// shapes upstream documents, either direct (the payload is the body) or wrapped
// ({"data": payload, "error": null}; errors as {"data": null, "error": "why"}). It keeps
// every version of every config in memory and records every request it gets.
//
// It knows nothing of Ferry: it is the remote side a runtime talks to.
package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

// Request is one request the server got.
type Request struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

// Server is the config API. Create it with New; its fields may be set before Start.
type Server struct {
	// Wrapped answers {"data": …, "error": …} instead of the payload alone.
	Wrapped bool

	mu       sync.Mutex
	configs  map[string]map[string]map[uint64]map[string]any // kind ("sinks", "sources") → key → version → config
	active   map[string]map[string]uint64
	requests []Request
	failNext int    // answer the next n requests 503
	failMsg  string // their error
	hold     chan struct{}
	srv      *http.Server
	ln       net.Listener
	done     chan struct{}
}

// New returns a server holding no config; Start it.
func New(wrapped bool) *Server {
	return &Server{Wrapped: wrapped,
		configs: map[string]map[string]map[uint64]map[string]any{"sinks": {}, "sources": {}},
		active:  map[string]map[string]uint64{"sinks": {}, "sources": {}}}
}

// Put stores cfg (a SinkConfig or SourceConfig object with key and version) under kind
// ("sinks" or "sources"); active: make it the active version.
func (s *Server) Put(kind string, cfg map[string]any, active bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := cfg["key"].(string)
	v := toUint(cfg["version"])
	if s.configs[kind][key] == nil {
		s.configs[kind][key] = map[uint64]map[string]any{}
	}
	s.configs[kind][key][v] = cfg
	if active {
		s.active[kind][key] = v
	}
}

func toUint(v any) uint64 {
	switch n := v.(type) {
	case int:
		return uint64(n)
	case uint64:
		return n
	case float64:
		return uint64(n)
	case json.Number:
		u, _ := strconv.ParseUint(string(n), 10, 64)
		return u
	}
	panic(fmt.Sprintf("providertest: version %v (%T)", v, v))
}

// FailNext makes the next n requests answer 503 with msg as their error.
func (s *Server) FailNext(n int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext, s.failMsg = n, msg
}

// Hold makes every request wait until Release (or until its client gives up).
func (s *Server) Hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = make(chan struct{})
}

// Release lets held requests go on.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

// Requests returns a copy of the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Start serves on addr ("127.0.0.1:0" for any free port) and returns the base URL.
func (s *Server) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /configs/active", s.getActive)
	mux.HandleFunc("GET /configs/active/versions", s.getVersions)
	mux.HandleFunc("POST /{kind}/{key}/configs", s.create)
	mux.HandleFunc("GET /{kind}/{key}/configs", s.list)
	mux.HandleFunc("DELETE /{kind}/{key}/configs", s.delete)
	mux.HandleFunc("GET /{kind}/{key}/configs/active", s.getActiveOne)
	mux.HandleFunc("PUT /{kind}/{key}/configs/active", s.setActive)
	mux.HandleFunc("GET /{kind}/{key}/configs/{version}", s.getVersion)
	s.ln, s.done = ln, make(chan struct{})
	s.srv = &http.Server{Handler: s.record(mux)}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String(), nil
}

// Close stops the server and waits for it.
func (s *Server) Close() {
	if s.srv == nil {
		return
	}
	s.Release()
	_ = s.srv.Close()
	<-s.done
}

func (s *Server) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		hold, fail, msg := s.hold, s.failNext > 0, s.failMsg
		if fail {
			s.failNext--
		}
		s.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		if fail {
			s.fail(w, http.StatusServiceUnavailable, msg)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func (s *Server) answer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if s.Wrapped {
		v = map[string]any{"data": v, "error": nil}
	}
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if s.Wrapped {
		_ = json.NewEncoder(w).Encode(map[string]any{"data": nil, "error": msg})
		return
	}
	_, _ = io.WriteString(w, msg)
}

func (s *Server) kind(w http.ResponseWriter, r *http.Request) (string, bool) {
	k := r.PathValue("kind")
	if k != "sinks" && k != "sources" {
		s.fail(w, http.StatusNotFound, "no such kind "+k)
		return "", false
	}
	return k, true
}

func (s *Server) getActive(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := map[string]map[string]any{"sinks": {}, "sources": {}}
	for kind, keys := range s.active {
		for key, v := range keys {
			if c, ok := s.configs[kind][key][v]; ok {
				out[kind][key] = c
			}
		}
	}
	s.mu.Unlock()
	s.answer(w, out)
}

func (s *Server) getVersions(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := map[string]map[string]any{"sinks": {}, "sources": {}}
	for kind, keys := range s.active {
		for key, v := range keys {
			out[kind][key] = map[string]any{"version": v, "created_at": "2026-01-01T00:00:00Z"}
		}
	}
	s.mu.Unlock()
	s.answer(w, out)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	kind, ok := s.kind(w, r)
	if !ok {
		return
	}
	var cfg map[string]any
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&cfg); err != nil || r.Header.Get("Content-Type") != "application/json" {
		s.fail(w, http.StatusBadRequest, fmt.Sprintf("want a JSON object (content-type %q): %v", r.Header.Get("Content-Type"), err))
		return
	}
	key := r.PathValue("key")
	s.mu.Lock()
	var next uint64
	if vs := s.configs[kind][key]; len(vs) > 0 {
		next = slices.Max(slices.Collect(maps.Keys(vs))) + 1
	}
	cfg["key"], cfg["version"] = key, next
	if s.configs[kind][key] == nil {
		s.configs[kind][key] = map[uint64]map[string]any{}
	}
	s.configs[kind][key][next] = cfg
	s.mu.Unlock()
	s.answer(w, cfg)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	kind, ok := s.kind(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	vs := s.configs[kind][r.PathValue("key")]
	out := make([]any, 0, len(vs))
	for _, v := range slices.Sorted(maps.Keys(vs)) {
		out = append(out, vs[v])
	}
	s.mu.Unlock()
	s.answer(w, out)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	kind, ok := s.kind(w, r)
	if !ok {
		return
	}
	key := r.PathValue("key")
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.active[kind][key]
	if q := r.URL.Query(); q.Has("version") {
		n, err := strconv.ParseUint(q.Get("version"), 10, 64)
		if err != nil {
			s.fail(w, http.StatusBadRequest, "version: "+err.Error())
			return
		}
		v, ok = n, true
	}
	if _, exists := s.configs[kind][key][v]; !ok || !exists {
		s.fail(w, http.StatusNotFound, "no such version")
		return
	}
	delete(s.configs[kind][key], v)
	if a, ok := s.active[kind][key]; ok && a == v {
		delete(s.active[kind], key)
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) getActiveOne(w http.ResponseWriter, r *http.Request) {
	kind, ok := s.kind(w, r)
	if !ok {
		return
	}
	key := r.PathValue("key")
	s.mu.Lock()
	v, ok := s.active[kind][key]
	c, exists := s.configs[kind][key][v]
	s.mu.Unlock()
	if !ok || !exists {
		s.fail(w, http.StatusNotFound, "no active config")
		return
	}
	s.answer(w, c)
}

func (s *Server) setActive(w http.ResponseWriter, r *http.Request) {
	kind, ok := s.kind(w, r)
	if !ok {
		return
	}
	var b struct {
		Version *uint64 `json:"version"`
	}
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil || b.Version == nil || r.Header.Get("Content-Type") != "application/json" {
		s.fail(w, http.StatusBadRequest, "want {\"version\": N}")
		return
	}
	key := r.PathValue("key")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.configs[kind][key][*b.Version]; !ok {
		s.fail(w, http.StatusNotFound, "no such version")
		return
	}
	s.active[kind][key] = *b.Version
	w.WriteHeader(http.StatusOK)
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) {
	kind, ok := s.kind(w, r)
	if !ok {
		return
	}
	v, err := strconv.ParseUint(r.PathValue("version"), 10, 64)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "version: "+err.Error())
		return
	}
	s.mu.Lock()
	c, ok := s.configs[kind][r.PathValue("key")][v]
	s.mu.Unlock()
	if !ok {
		s.fail(w, http.StatusNotFound, "no such version")
		return
	}
	s.answer(w, c)
}
