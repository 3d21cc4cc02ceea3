package connect

// This file is what the Runtime checks of a connector before it opens it, exported as
// CheckSink and CheckSource so that `ferry check` refuses exactly what a run refuses, with
// the same words; and the connector that stands for a config that did not load.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// permanentError marks an error, without changing its text, as one a restart cannot fix
// (the text is the connector's last_error, which `ferry check` prints as well).
type permanentError struct{ error }

func (e permanentError) Unwrap() error        { return e.error }
func (e permanentError) Is(target error) bool { return target == errPermanent }

// CheckSink returns the error with which a Runtime built with opts refuses to start sink
// cfg before opening it, in the words of its last_error: an unknown built-in, a built-in's
// offset_commit or plugin_config its spec refuses (sink_controlled for a sink that never
// commits included), a plugin library that is not found, does not load or lacks
// a symbol, a sink_controlled sink whose library lacks the commit callback. It opens nothing
// and connects to nothing (a native library is loaded, as at run). Only opts.Builtins and
// opts.LoadSinkPlugin are read. Nil when the sink can be started.
//
// The offset_commit checked is the one the sink runs with ([SinkCommitMode]): a file
// without the key runs a built-in that takes one mode only in that mode. A built-in that
// declares sdk.CommitsNever is refused sink_controlled, the error naming the file, the key
// and the mode to set instead.
func CheckSink(opts Options, cfg *config.Sink) error {
	reg := opts.builtins()
	cfg, _ = effectiveSink(reg, cfg)
	_, err := sinkFactory(reg, opts.LoadSinkPlugin, cfg, opts.pluginDirs())
	return err
}

// SinkCommitMode returns the offset_commit mode sink cfg runs with in a Runtime built with
// opts, and whether that is its built-in's own mode rather than the file's: a file that
// sets no offset_commit (cfg.OffsetCommitUnset), of a built-in whose spec lists one mode
// only (sdk.ConfigSpec.DefaultCommitMode: builtin:s3 and sink_controlled), runs with that
// mode, so a file copied from a runtime without the key runs instead of being refused.
// Otherwise it is cfg.OffsetCommit. Only opts.Builtins is read.
func SinkCommitMode(opts Options, cfg *config.Sink) (mode config.CommitMode, builtinDefault bool) {
	return sinkCommitMode(opts.builtins(), cfg)
}

func sinkCommitMode(reg *sdk.Registry, cfg *config.Sink) (config.CommitMode, bool) {
	name, ok := cfg.Builtin()
	if !cfg.OffsetCommitUnset || !ok {
		return cfg.OffsetCommit, false
	}
	spec, _ := reg.SinkSpec(name)
	if m, ok := spec.DefaultCommitMode(); ok && config.CommitMode(m) != cfg.OffsetCommit {
		return config.CommitMode(m), true
	}
	return cfg.OffsetCommit, false
}

// effectiveSink returns cfg, or, when its built-in chooses its mode ([SinkCommitMode]), a
// copy of cfg with that mode and true. The copy shares cfg's slices and maps: neither is
// changed.
func effectiveSink(reg *sdk.Registry, cfg *config.Sink) (*config.Sink, bool) {
	mode, builtinDefault := sinkCommitMode(reg, cfg)
	if !builtinDefault {
		return cfg, false
	}
	c := *cfg
	c.OffsetCommit = mode
	return &c, true
}

// CheckSource is [CheckSink] for a source (opts.Builtins, opts.LoadSourcePlugin), and
// reads its state file as its start does (opts.Runtime's state.path): a directory missing
// below the state directory fails it; the state directory itself is created at start, so
// its absence is no error. Nothing is created.
func CheckSource(opts Options, cfg *config.Source) error {
	if _, err := sourceFactory(opts.builtins(), opts.LoadSourcePlugin, cfg, opts.pluginDirs()); err != nil {
		return err
	}
	dir := DefaultStateDir
	if opts.Runtime != nil && opts.Runtime.State.Path != "" {
		dir = opts.Runtime.State.Path
	}
	f := newStateFile(dir, cfg.Key)
	if filepath.Dir(f.path) == filepath.Clean(dir) {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil // created at start
		}
	}
	if _, err := f.load(); err != nil {
		return stateLoadError(err)
	}
	return nil
}

// stateLoadError is a source's failure to load its state, in the words upstream reports
// (its users match on "Failed to load source state"). Permanent: the state path comes from
// the key, so only an operator (creating the directory) fixes it.
func stateLoadError(err error) error {
	return permanentError{fmt.Errorf("Failed to load source state: %w", err)} //nolint:staticcheck // upstream's words
}

// pluginDirs are the directories native plugins may load from ([plugins] directories), as
// New decides them.
func (o Options) pluginDirs() []string {
	rc := o.Runtime
	if rc == nil {
		rc = config.DefaultRuntime()
	}
	return rc.PluginDirs()
}

func (o Options) builtins() *sdk.Registry {
	if o.Builtins == nil {
		return sdk.NewRegistry()
	}
	return o.Builtins
}

// commitChecker is a native sink instance that can say, before it is opened, whether it
// can run sink_controlled (connect/plugin's Sink); its error is the one Open would return.
type commitChecker interface {
	CheckCommit(key string) error
}

// sinkFactory finds sink cfg's factory and checks what can be checked before an Open.
func sinkFactory(reg *sdk.Registry, load SinkPluginLoader, cfg *config.Sink, dirs []string) (sdk.SinkFactory, error) {
	f, err := connectorFactory("sink", &cfg.Common, reg.Sink, reg.SinkNames, load, dirs)
	if err != nil {
		return nil, err
	}
	if name, ok := cfg.Builtin(); ok {
		spec, _ := reg.SinkSpec(name)
		if err := spec.CheckCommitMode(string(cfg.OffsetCommit)); err != nil {
			return nil, permanentError{fmt.Errorf("%s: %w", cfg.File, err)}
		}
		return f, checkPluginConfig(spec, &cfg.Common)
	}
	if cfg.OffsetCommit == config.CommitSinkControlled {
		if cc, ok := f().(commitChecker); ok {
			if err := cc.CheckCommit(cfg.Key); err != nil {
				return nil, err
			}
		}
	}
	return f, nil
}

// sourceFactory finds source cfg's factory and checks what can be checked before an Open.
func sourceFactory(reg *sdk.Registry, load SourcePluginLoader, cfg *config.Source, dirs []string) (sdk.SourceFactory, error) {
	f, err := connectorFactory("source", &cfg.Common, reg.Source, reg.SourceNames, load, dirs)
	if err != nil {
		return nil, err
	}
	if name, ok := cfg.Builtin(); ok {
		spec, _ := reg.SourceSpec(name)
		return f, checkPluginConfig(spec, &cfg.Common)
	}
	return f, nil
}

// checkPluginConfig validates a built-in connector's plugin_config against its spec, as its
// Open would, naming the connector's file, every field and its line. Permanent: the config does not
// change until a restart re-reads it.
func checkPluginConfig(spec sdk.ConfigSpec, c *config.Common) error {
	errs := append(spec.Validate(c.PluginConfig), config.CheckOutputPaths(spec, c.PluginConfig)...)
	if len(errs) == 0 {
		return nil
	}
	var msgs []string
	for _, e := range flattenErrors(c.PluginConfigError(errors.Join(errs...))) {
		msgs = append(msgs, e.Error())
	}
	return permanentError{errors.New(strings.Join(msgs, "; "))}
}

// invalidConnector stands for a connector whose config file did not load
// (config.Connectors.Invalid): status error with the file's error, never restarted; an
// operator's restart re-reads the file.
type invalidConnector struct {
	runner
	inv         *config.Invalid
	startErrors atomic.Uint64 // its failed start, so its errors count says it is in error
}

func newInvalidConnector(inv *config.Invalid, log *slog.Logger) *invalidConnector {
	c := &invalidConnector{inv: inv}
	c.init(string(inv.Type), inv.Key, inv.Name, 0, &c.startErrors, log.With(string(inv.Type), inv.Key))
	c.failStart(permanentError{inv.Err})
	return c
}

func (c *invalidConnector) begin(context.Context) {} // failed when built

func (c *invalidConnector) statusOf() Status {
	st, le := c.status.get()
	return Status{Key: c.inv.Key, Kind: c.kind, Name: c.inv.Name, Path: c.inv.Path, Version: c.inv.Version,
		State: st, LastError: le, Enabled: c.inv.Enabled, PluginVersion: "unknown",
		Stats: Stats{StartErrors: c.startErrors.Load()}}
}

// errInvalidConfig is returned by the operations that need a sink's config when its file did
// not load.
var errInvalidConfig = errors.New("its config file did not load")

var _ connector = (*invalidConnector)(nil)

// flattenErrors lists the errors joined in err.
func flattenErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flattenErrors(e)...)
		}
		return out
	}
	if err == nil {
		return nil
	}
	return []error{err}
}
