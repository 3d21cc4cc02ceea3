package connect

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/ferryio/ferry/connect/config"
)

// ConnectorScanner reads every connector config for a reload (the files of the runtime's
// config_dir, or a config API's active configs), keeping those that load apart from those
// that do not (connect/provider's Local and HTTP implement it). Options.Configs must implement it for [Runtime.Reload].
type ConnectorScanner interface {
	Scan() (*config.Connectors, []config.FileError, error)
}

// ErrNoReload is returned by Reload when the runtime has no connector files to re-read
// (Options.Configs does not implement ConnectorScanner).
var ErrNoReload = errors.New("connect: this runtime has no connector files to reload")

// ReloadResult says what a reload did, connector by connector ("sink KEY", "source KEY",
// each list sorted).
type ReloadResult struct {
	Started   []string // new files (or files newly enabled): started
	Restarted []string // changed config: stopped and started with the new one
	Stopped   []string // file removed or disabled: stopped and dropped
	Unchanged []string // same config: left running untouched
	// Refused lists the files that did not load; the connector they name (or whose file
	// they are) keeps its running config.
	Refused []RefusedConfig
}

// RefusedConfig is one connector file a reload refused.
type RefusedConfig struct {
	Kind, Key string // "" when the file's header could not be read
	File      string
	Error     string
}

// Reload re-reads the connector files and applies them to the running connectors: a
// connector whose active config changed is restarted with the new one (a graceful stop,
// as a restart through the API: its in-flight work finishes and its commits are
// stored); a new enabled one is started; one whose file is gone, or now disabled, is
// stopped and dropped; one whose config is the same keeps running untouched, with its
// instance, offsets and counters. A connector stopped by the operator stays stopped and
// takes a changed config at its next restart (it is listed as restarted). A file that does not load is refused: the connector it
// names, or whose config it held, keeps running its old config, and the refusal is in
// the result (and logged). Reloads are serialised; ctx bounds each stop. Errors: the
// runtime stopped (ErrStopped), ErrNoReload, an unreadable config_dir (nothing changed).
func (r *Runtime) Reload(ctx context.Context) (ReloadResult, error) {
	var res ReloadResult
	scan, ok := r.configs.(ConnectorScanner)
	if !ok {
		return res, ErrNoReload
	}
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	next, bad, err := scan.Scan()
	if err != nil {
		return res, fmt.Errorf("reload: %w", err)
	}
	for _, w := range next.Warnings {
		r.log.Warn(w)
	}
	refused := func(kind, key, file string) bool {
		for _, fe := range bad {
			if (string(fe.Type) == kind && fe.Key == key) || (file != "" && fe.File == file) {
				return true
			}
		}
		return false
	}
	for _, fe := range bad {
		res.Refused = append(res.Refused, RefusedConfig{Kind: string(fe.Type), Key: fe.Key, File: fe.File, Error: fe.Err.Error()})
		r.log.Error("reload: connector file refused; the running config is kept", "file", fe.File, "kind", fe.Type, "key", fe.Key, "error", fe.Err)
	}

	r.mu.Lock()
	if r.life.soft.Err() != nil {
		r.mu.Unlock()
		return res, ErrStopped
	}
	slots := r.slotList()
	r.mu.Unlock()
	have := map[string]bool{}
	for _, sl := range slots {
		name := sl.kind + " " + sl.key
		have[name] = true
		oldSink, oldSrc := sl.configs()
		oldFile := ""
		if oldSink != nil {
			oldFile = oldSink.File
		} else if oldSrc != nil {
			oldFile = oldSrc.File
		}
		if refused(sl.kind, sl.key, oldFile) {
			continue
		}
		var cmd command
		switch newSink, newSrc := next.Sink(sl.key), next.Source(sl.key); {
		case sl.kind == KindSink && newSink != nil && newSink.Enabled:
			if sameConfig(oldSink, newSink) {
				res.Unchanged = append(res.Unchanged, name)
				continue
			}
			cmd = command{op: opReplace, sink: newSink}
		case sl.kind == KindSource && newSrc != nil && newSrc.Enabled:
			if sameConfig(oldSrc, newSrc) {
				res.Unchanged = append(res.Unchanged, name)
				continue
			}
			cmd = command{op: opReplace, src: newSrc}
		default:
			cmd = command{op: opRemove}
		}
		if err := sl.send(ctx, cmd); err != nil {
			return res, fmt.Errorf("reload %s: %w", name, err)
		}
		if cmd.op == opRemove {
			r.dropSlot(sl)
			res.Stopped = append(res.Stopped, name)
			r.log.Info("reload: "+sl.kind+" stopped: its file is gone or disabled", "key", sl.key)
		} else {
			res.Restarted = append(res.Restarted, name)
			r.log.Info("reload: "+sl.kind+" restarted with its changed config", "key", sl.key)
		}
	}

	var added []*slot
	for _, cfg := range next.Sources {
		if cfg.Enabled && !have[KindSource+" "+cfg.Key] && !refused(KindSource, cfg.Key, cfg.File) {
			added = append(added, r.newSlot(KindSource, cfg.Key, nil, cfg))
		}
	}
	for _, cfg := range next.Sinks {
		if cfg.Enabled && !have[KindSink+" "+cfg.Key] && !refused(KindSink, cfg.Key, cfg.File) {
			added = append(added, r.newSlot(KindSink, cfg.Key, cfg, nil))
		}
	}
	if len(added) > 0 {
		// Launched before they are listed, so Status never sees a slot without an
		// instance and no lock is held while a connector opens; listed under r.mu only if
		// the runtime is not stopping (Stop then waits for their supervisors).
		for _, sl := range added {
			sl.launch(ctx, nil)
		}
		r.mu.Lock()
		if r.life.soft.Err() != nil {
			r.mu.Unlock()
			for _, sl := range added {
				sl.stopInstance(sl.cur.Load(), r.life.hard)
			}
			return res, ErrStopped
		}
		r.slots = append(r.slots, added...)
		for _, sl := range added {
			go sl.supervise()
			res.Started = append(res.Started, sl.kind+" "+sl.key)
			r.log.Info("reload: "+sl.kind+" started from a new file", "key", sl.key)
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.conns = next
	r.mu.Unlock()
	for _, l := range [][]string{res.Started, res.Restarted, res.Stopped, res.Unchanged} {
		slices.Sort(l)
	}
	r.log.Info("reload done", "started", len(res.Started), "restarted", len(res.Restarted), "stopped", len(res.Stopped),
		"unchanged", len(res.Unchanged), "refused", len(res.Refused))
	return res, nil
}

// configs returns the slot's current config.
func (sl *slot) configs() (*config.Sink, *config.Source) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.sinkCfg, sl.srcCfg
}

// replaceConfig sets the config of an opReplace command; false when the operator stopped
// the connector (it then stays stopped, and starts with the new config when restarted).
func (sl *slot) replaceConfig(cmd command) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if cmd.sink != nil {
		sl.sinkCfg = cmd.sink
	}
	if cmd.src != nil {
		sl.srcCfg = cmd.src
	}
	return !sl.userStopped
}

func (sl *slot) isRemoved() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.removed
}

// send hands cmd to the supervisor and waits for its reply (do, with a config).
func (sl *slot) send(ctx context.Context, cmd command) error {
	cmd.ctx, cmd.reply = ctx, make(chan error, 1)
	select {
	case sl.cmds <- cmd:
	case <-sl.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-cmd.reply:
		return err
	case <-sl.done:
		// A supervisor that ends right after its reply (a removal) has both ready: the
		// reply wins.
		select {
		case err := <-cmd.reply:
			return err
		default:
			return ErrStopped
		}
	}
}

// dropSlot removes a removed slot once its supervisor ended.
func (r *Runtime) dropSlot(sl *slot) {
	<-sl.done
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slots = slices.DeleteFunc(r.slots, func(s *slot) bool { return s == sl })
}

// sameConfig reports whether two configs of one connector would run alike: equal but for
// the file they were read from, the warnings of their load and the lines their keys are on.
func sameConfig[C config.Sink | config.Source](a, b *C) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	for _, c := range []*config.Common{common(&x), common(&y)} {
		c.File, c.Warnings, c.PluginKeys = "", nil, nil
	}
	return reflect.DeepEqual(x, y)
}

func common[C config.Sink | config.Source](c *C) *config.Common {
	switch v := any(c).(type) {
	case *config.Sink:
		return &v.Common
	case *config.Source:
		return &v.Common
	}
	return nil
}
