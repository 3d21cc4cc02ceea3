package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// SinkPluginLoader opens the native sink plugin library at path (already resolved with
// config.ResolvePluginPath) and returns a factory of sink instances over it. cmd/ferry
// wires it to connect/plugin, so this package needs no cgo. A plugin instance opened with a
// Committer (sink_controlled) must refuse to open when the library lacks
// iggy_sink_set_commit_callback.
type SinkPluginLoader func(path string) (sdk.SinkFactory, error)

// ErrStopped is returned by Start after Stop.
var ErrStopped = errors.New("connect: runtime stopped")

// connector is a running sink or source as the Runtime drives it. Sources (written later in
// this package) implement it too.
type connector interface {
	requestStop()
	abandon()
	doneCh() <-chan struct{}
	statusOf() Status
}

func (s *sinkRunner) doneCh() <-chan struct{} { return s.done }

// Runtime runs the connectors of one configuration. Build it with [New]; its methods are
// safe for concurrent use.
type Runtime struct {
	conns    *config.Connectors
	be       backend
	builtins *sdk.Registry
	loadSink SinkPluginLoader
	log      *slog.Logger
	reg      *registry
	nextID   atomic.Uint32
	sources  sourceDeps // source.go

	mu       sync.Mutex
	started  bool
	stopping bool
	running  []connector
}

func newRuntime(conns *config.Connectors, be backend, builtins *sdk.Registry, load SinkPluginLoader, log *slog.Logger) *Runtime {
	if log == nil {
		log = slog.Default()
	}
	if builtins == nil {
		builtins = sdk.NewRegistry()
	}
	return &Runtime{conns: conns, be: be, builtins: builtins, loadSink: load, log: log, reg: newRegistry()}
}

// Start opens every enabled sink and starts it. A connector that fails to start (unknown
// built-in, plugin not found, Open error, missing stream or topic) is kept with status
// error and its last_error; the others run. Start returns an error only when called after
// Stop or twice. ctx bounds the opening only.
func (r *Runtime) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return ErrStopped
	}
	if r.started {
		return errors.New("connect: runtime already started")
	}
	r.started = true
	r.running = append(r.running, r.startSources(ctx)...)
	for _, cfg := range r.conns.Sinks {
		if !cfg.Enabled {
			continue
		}
		s := r.startSink(ctx, cfg)
		r.running = append(r.running, s)
	}
	return nil
}

func (r *Runtime) startSink(ctx context.Context, cfg *config.Sink) *sinkRunner {
	id := r.nextID.Add(1)
	factory, err := r.sinkFactory(cfg)
	if err != nil {
		s := newSinkRunner(cfg, id, nil, r.reg, r.be, r.log)
		s.status.fail(err)
		s.cancelAbandon()
		close(s.done)
		r.log.Error("sink not started", "sink", cfg.Key, "error", err)
		return s
	}
	s := newSinkRunner(cfg, id, factory(), r.reg, r.be, r.log)
	if err := s.start(ctx); err != nil {
		r.log.Error("sink not started", "sink", cfg.Key, "error", err)
	}
	return s
}

func (r *Runtime) sinkFactory(cfg *config.Sink) (sdk.SinkFactory, error) {
	if name, ok := cfg.Builtin(); ok {
		f, ok := r.builtins.Sink(name)
		if !ok {
			return nil, fmt.Errorf("unknown built-in sink %q (known: %v)", name, r.builtins.SinkNames())
		}
		return f, nil
	}
	if r.loadSink == nil {
		return nil, fmt.Errorf("native plugin %s: this runtime has no plugin loader", cfg.Path)
	}
	path, err := config.ResolvePluginPath(cfg.Path, nil)
	if err != nil {
		return nil, err
	}
	f, err := r.loadSink(path)
	if err != nil {
		return nil, fmt.Errorf("load plugin %s: %w", path, err)
	}
	return f, nil
}

// Stop stops every connector in two phases. The first call drains: each sink stops
// polling, finishes its in-flight batches (bounded by its shutdown_timeout), closes the
// sink, writes pending commits and leaves its groups; Stop returns nil when all are done.
// When ctx ends first, or on a second call, the remaining work is abandoned (in-flight
// batches cancelled and not committed, pending commits not written: they are redelivered)
// and Stop returns ctx.Err() without waiting further.
func (r *Runtime) Stop(ctx context.Context) error {
	r.mu.Lock()
	second := r.stopping
	r.stopping = true
	conns := append([]connector(nil), r.running...)
	r.mu.Unlock()
	if second {
		for _, c := range conns {
			c.abandon()
		}
	}
	for _, c := range conns {
		c.requestStop()
	}
	for _, c := range conns {
		select {
		case <-c.doneCh():
		case <-ctx.Done():
			for _, c := range conns {
				c.abandon()
			}
			return ctx.Err()
		}
	}
	return nil
}

// Status reports every started connector, sorted by kind then key.
func (r *Runtime) Status() []Status {
	r.mu.Lock()
	conns := append([]connector(nil), r.running...)
	r.mu.Unlock()
	out := make([]Status, 0, len(conns))
	for _, c := range conns {
		out = append(out, c.statusOf())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Key < out[j].Key
	})
	return out
}
