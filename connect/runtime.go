package connect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
	"go.opentelemetry.io/otel/trace"
)

// SinkPluginLoader opens the native sink plugin library at path (already resolved with
// config.ResolvePluginPath) and returns a factory of sink instances over it. The runtime
// only sees this function type; native.go (the one file of this package that imports the
// cgo package connect/plugin) provides NativeSinkLoader. A plugin instance opened with a
// Committer (sink_controlled) must refuse to open when the library lacks
// iggy_sink_set_commit_callback.
type SinkPluginLoader func(path string) (sdk.SinkFactory, error)

// SourcePluginLoader opens the native source plugin library at path (already resolved
// with config.ResolvePluginPath) and returns a factory of source instances over it.
type SourcePluginLoader func(path string) (sdk.SourceFactory, error)

// ErrStopped is returned by Start after Stop.
var ErrStopped = errors.New("connect: runtime stopped")

// connector is a running sink or source as the Runtime drives it.
type connector interface {
	stop()    // soft stop: finish what is in flight, within the connector's timeout
	abandon() // hard stop: abandon it now
	stopped() <-chan struct{}
	// begin starts an instance that has not failed yet (its plugin was found), its Open
	// bounded by ctx; a failure is logged and kept in its status (failStart).
	begin(ctx context.Context)
	statusOf() Status
	// unfixable reports that it failed in a way no restart can fix (permanent).
	unfixable() bool
}

// errPermanent marks failures a restart cannot fix: an unknown built-in, a file that is
// not a plugin, a missing symbol (the library is loaded once per process), a plugin
// without the commit callback asked to run sink_controlled. permanentErrors lists the
// plugin loader's (native.go adds them) and a connector's own sdk.Permanent errors.
var (
	errPermanent    = errors.New("a restart cannot fix this")
	permanentErrors = []error{errPermanent, sdk.ErrPermanent}
)

func permanent(err error) bool {
	for _, p := range permanentErrors {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// runner is what a sink runner and a source runner share: how they are stopped and how
// a failed start is recorded. It implements connector but for statusOf.
type runner struct {
	kind        string // "sink" or "source"
	key, name   string // the connector's, for the lines in upstream's words (iggy_lines.go)
	log         *slog.Logger
	status      statusCell
	life        *lifecycle
	permanent   atomic.Bool    // failStart's error was permanent
	startErrors *atomic.Uint64 // counts failStart calls (an error of the connector, as metrics report it)
	bench       *benchLog      // nil unless benchmark = true
}

func (r *runner) unfixable() bool { return r.permanent.Load() }

func (r *runner) init(kind, key, name string, timeout time.Duration, startErrors *atomic.Uint64, log *slog.Logger) {
	r.kind, r.key, r.name, r.log, r.life, r.startErrors = kind, key, name, log, newLifecycle(timeout), startErrors
	r.status.set(StateStarting)
}

// pluginVersion is the version a native plugin reports (the plugin loader's sdk.Versioned
// instances), "builtin" for built-in connectors, else "unknown".
func pluginVersion(c *config.Common, instance any) string {
	if _, ok := c.Builtin(); ok {
		return "builtin"
	}
	if v, ok := instance.(interface{ Version() string }); ok && v.Version() != "" {
		return v.Version()
	}
	return "unknown"
}

func (r *runner) stop()                    { r.life.Stop() }
func (r *runner) abandon()                 { r.life.Abandon() }
func (r *runner) stopped() <-chan struct{} { return r.life.Done() }

// failStart records why the connector did not start; the runner is then stopped.
func (r *runner) failStart(err error) {
	r.permanent.Store(permanent(err))
	r.startErrors.Add(1)
	r.status.fail(err)
	r.log.Error(r.kind+" not started", "error", err)
	r.logNotStarted(err)
	r.life.Finish()
}

// Runtime runs the connectors of one configuration. Build it with [New]; its methods are
// safe for concurrent use.
type Runtime struct {
	conns    *config.Connectors
	be       backend
	builtins *sdk.Registry
	loadSink SinkPluginLoader
	loadSrc  SourcePluginLoader
	configs  ConfigSource
	stateDir string
	log      *slog.Logger
	nextID   atomic.Uint32
	life     *lifecycle // no timeout: Stop's ctx bounds it
	lag      *lagReader // every sink's offsets as Iggy has them (SinkPartitions, Offsets)

	failed     chan struct{} // closed when every connector failed for good
	failedOnce sync.Once

	// pluginDirs are where native plugins may be loaded from (config.Runtime.PluginDirs).
	pluginDirs []string
	tracer     trace.Tracer // Options.Tracer
	reloadMu   sync.Mutex   // serialises Reload

	mu      sync.Mutex
	started bool
	slots   []*slot // one per enabled connector, sources first
}

func newRuntime(opts Options, be backend, stateDir string) *Runtime {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	builtins := opts.Builtins
	if builtins == nil {
		builtins = sdk.NewRegistry()
	}
	rc := opts.Runtime
	if rc == nil {
		rc = config.DefaultRuntime()
	}
	return &Runtime{conns: opts.Connectors, be: be, builtins: builtins, loadSink: opts.LoadSinkPlugin,
		loadSrc: opts.LoadSourcePlugin, configs: opts.Configs, stateDir: stateDir, pluginDirs: rc.PluginDirs(),
		log: log, life: newLifecycle(0), failed: make(chan struct{}), lag: newLagReader(be), tracer: opts.Tracer}
}

// Start opens every enabled connector and starts it: sources first, as upstream, then
// sinks. No connector creates a stream or topic (`ferry run --create-topics` does, before
// Start); one that names a missing one fails its start (missingTopicError). A
// connector that fails to start (unknown built-in, plugin not found, Open error, missing
// stream or topic) is kept with status error and its last_error, and restarted by its
// supervisor as its [restart] policy says (not when a restart cannot fix it: see
// [CheckSink]); the others run. So is every enabled connector of Connectors.Invalid,
// with its file's error, never restarted automatically. Start first creates the state
// directory ([EnsureStateDir]); it returns an error when that fails, or when called after
// Stop or twice. ctx bounds the first opening only.
func (r *Runtime) Start(ctx context.Context) error {
	// A reload waits for the start; Status, Stop and the operator's commands do not (the
	// commands wait for their connector's first instance only).
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	r.mu.Lock()
	if r.life.soft.Err() != nil {
		r.mu.Unlock()
		return ErrStopped
	}
	if r.started {
		r.mu.Unlock()
		return errors.New("connect: runtime already started")
	}
	if err := EnsureStateDir(r.stateDir); err != nil {
		r.mu.Unlock()
		return err
	}
	r.started = true
	for _, cfg := range r.conns.Sources {
		if !cfg.Enabled {
			r.log.Warn(disabledLine(KindSource, cfg.Name, cfg.Key), "source", cfg.Key)
			continue
		}
		r.slots = append(r.slots, r.newSlot(KindSource, cfg.Key, nil, cfg))
	}
	for _, cfg := range r.conns.Sinks {
		if !cfg.Enabled {
			r.log.Warn(disabledLine(KindSink, cfg.Name, cfg.Key), "sink", cfg.Key)
			continue
		}
		r.slots = append(r.slots, r.newSlot(KindSink, cfg.Key, cfg, nil))
	}
	for _, inv := range r.conns.Invalid {
		if !inv.Enabled {
			r.log.Warn(string(inv.Type)+" disabled, and its config file does not load", "key", inv.Key, "error", inv.Err)
			continue
		}
		sl := r.newSlot(string(inv.Type), inv.Key, nil, nil)
		sl.invalid = inv
		r.slots = append(r.slots, sl)
	}
	slots := r.slotList()
	for _, sl := range slots {
		sl.publish()
	}
	r.mu.Unlock()
	// Opened without r.mu: while one opens (a target that takes its time to answer),
	// Status answers, every connector starting until its own start ends.
	for _, sl := range slots {
		sl.begin(ctx, sl.cur.Load().c, false)
	}
	for _, sl := range slots {
		go sl.supervise()
	}
	return nil
}

// slotList returns the slots; r.mu held.
func (r *Runtime) slotList() []*slot { return slices.Clone(r.slots) }

// newSink builds an instance of a sink, counting into the slot's counters. It is not
// started (begin starts it): its status is starting, or error when its plugin cannot be
// found.
//
// A file without offset_commit whose built-in runs with one mode only runs with that mode
// ([SinkCommitMode]), which one INFO line says.
func (r *Runtime) newSink(cfg *config.Sink, counters *Counters) *sinkRunner {
	cfg, builtinMode := effectiveSink(r.builtins, cfg)
	if builtinMode {
		r.log.Info(fmt.Sprintf("sink runs with offset_commit = %q: its file sets no offset_commit, and %s runs only with that mode", cfg.OffsetCommit, cfg.Path),
			"sink", cfg.Key, "file", cfg.File)
	}
	factory, err := sinkFactory(r.builtins, r.loadSink, cfg, r.pluginDirs)
	if err != nil {
		s := newSinkRunner(cfg, r.nextID.Add(1), nil, r.be, counters, r.log)
		s.failStart(err)
		return s
	}
	s := newSinkRunner(cfg, r.nextID.Add(1), factory(), r.be, counters, r.log)
	s.tracer = r.tracer
	return s
}

// newSource builds an instance of a source, counting into the slot's counters; as newSink.
func (r *Runtime) newSource(cfg *config.Source, counters *sourceCounters) *sourceRunner {
	factory, err := sourceFactory(r.builtins, r.loadSrc, cfg, r.pluginDirs)
	if err != nil {
		s := newSourceRunner(cfg, r.nextID.Add(1), nil, r.be, r.stateDir, counters, r.log)
		s.failStart(err)
		return s
	}
	s := newSourceRunner(cfg, r.nextID.Add(1), factory(), r.be, r.stateDir, counters, r.log)
	s.tracer = r.tracer
	return s
}

// connectorFactory finds the factory of a connector: a built-in ("builtin:NAME", looked
// up with builtin) or a native plugin loaded with load (nil: this runtime has none) from
// its real path, which must lie in one of dirs (a library elsewhere is never opened).
func connectorFactory[F any](kind string, c *config.Common, builtin func(string) (F, bool), names func() []string, load func(string) (F, error), dirs []string) (F, error) {
	var zero F
	if name, ok := c.Builtin(); ok {
		f, ok := builtin(name)
		if !ok {
			return zero, fmt.Errorf("unknown built-in %s %q (known: %v): %w", kind, name, names(), errPermanent)
		}
		return f, nil
	}
	if load == nil {
		return zero, fmt.Errorf("native plugin %s: this runtime has no plugin loader", c.Path)
	}
	path, err := config.LoadablePluginPath(c.Path, dirs)
	if err != nil {
		// Upstream's prefix, which its users match on, before Ferry's detail.
		return zero, fmt.Errorf("Failed to resolve plugin path: %w", err) //nolint:staticcheck // upstream's words
	}
	f, err := load(path)
	if err != nil {
		return zero, fmt.Errorf("Failed to load %s container from %s: %w", kind, path, err) //nolint:staticcheck // upstream's words
	}
	return f, nil
}

// Stop stops every connector in two phases. The first call is the soft stop: each
// connector stops taking new work and finishes what is in flight within its own
// shutdown_timeout (a sink: finish its batches, close, store pending commits, leave its
// groups); Stop returns nil when all are done. A second call, or ctx ending first, is the
// hard stop: the remaining work is abandoned (in-flight batches cancelled and not
// committed, pending commits not written: they are redelivered) and Stop returns
// ctx.Err() (nil on a second call) without waiting further.
func (r *Runtime) Stop(ctx context.Context) error {
	r.mu.Lock()
	second := r.life.soft.Err() != nil
	r.life.Stop() // every supervisor stops its instance and ends
	slots := r.slotList()
	r.mu.Unlock()
	if second {
		r.life.Abandon()
	}
	for _, sl := range slots {
		select {
		case <-sl.done:
		case <-ctx.Done():
			r.life.Abandon()
			return ctx.Err()
		}
	}
	r.lag.close()
	r.life.Finish()
	return nil
}

// Status reports every started connector, sorted by kind then key.
func (r *Runtime) Status() []Status {
	r.mu.Lock()
	slots := r.slotList()
	r.mu.Unlock()
	out := make([]Status, 0, len(slots))
	for _, sl := range slots {
		out = append(out, sl.status())
	}
	slices.SortFunc(out, func(a, b Status) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Key, b.Key)) })
	return out
}
