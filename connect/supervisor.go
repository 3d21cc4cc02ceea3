package connect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/connect/config"
)

// healthyAfter is how long an instance must have run before its failure counts as a new
// series: the restart count then starts again at 0 (a connector that fails once a day is
// restarted every day, not given up after max_restarts days).
var healthyAfter = time.Minute

// A slot is one configured connector (kind, key) for the life of the Runtime, and its
// supervisor: the goroutine that starts its instances, restarts a failed one with capped
// exponential backoff ([restart] of its config), and carries out the operator's restart
// and stop (docs/architecture.md, "Supervision"). An instance is one sinkRunner or
// sourceRunner with its own plugin id; a restart replaces it with a new one.
//
// Only the supervisor goroutine starts and stops instances; control methods send it a
// command and wait for the reply, so commands on one connector are serialised.
type slot struct {
	r    *Runtime
	kind string
	key  string
	cmds chan command
	done chan struct{} // closed when the supervisor ends (the runtime stopped)

	cur atomic.Pointer[instance] // the latest instance; nil before the first start

	// The connector's counters (of its kind; the other is nil), shared by every instance
	// it starts: they only grow for the life of the Runtime (a restart never resets a
	// Prometheus counter).
	sinkCounters *Counters
	srcCounters  *sourceCounters

	mu          sync.Mutex // guards the fields below
	sinkCfg     *config.Sink
	srcCfg      *config.Source
	invalid     *config.Invalid // the config file did not load (both configs nil): see invalidConnector
	restarts    uint32          // automatic restarts in the current series of failures
	total       uint64          // every restart
	nextRetry   time.Time       // zero unless an automatic restart is scheduled
	gaveUp      bool
	userStopped bool
	waitPlugin  bool // launch waits for the previous instance's plugin call (awaitPlugin)
	removed     bool // its config is gone (Reload): the supervisor ends
}

// instance is one started runner and when it started.
type instance struct {
	c       connector
	started time.Time
}

type commandOp int

const (
	opRestart commandOp = iota
	opStop
	opReplace // Reload: restart with the config in the command
	opRemove  // Reload: stop for good and end the supervisor
)

type command struct {
	op    commandOp
	ctx   context.Context
	reply chan error
	sink  *config.Sink   // opReplace
	src   *config.Source // opReplace
}

func (r *Runtime) newSlot(kind, key string, sink *config.Sink, src *config.Source) *slot {
	sl := &slot{r: r, kind: kind, key: key, sinkCfg: sink, srcCfg: src,
		cmds: make(chan command), done: make(chan struct{})}
	if sink != nil {
		sl.sinkCounters = new(Counters)
	} else {
		sl.srcCounters = new(sourceCounters)
	}
	return sl
}

func (sl *slot) policy() config.RestartPolicy {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	switch {
	case sl.sinkCfg != nil:
		return sl.sinkCfg.Restart
	case sl.srcCfg != nil:
		return sl.srcCfg.Restart
	}
	return config.RestartPolicy{} // an invalid config: never restarted automatically
}

// launch starts a new instance of the current config (its Open bounded by ctx), once no
// call into the previous instance's plugin runs (awaitPlugin). reply, when not nil, is
// the requested restart's: it gets nil once the instance started or the wait began.
func (sl *slot) launch(ctx context.Context, reply chan<- error) {
	prev := sl.cur.Load() // nil: the first start, else a restart
	if prev != nil {
		ok, replied := sl.awaitPlugin(prev, reply)
		if replied {
			reply = nil
		}
		if !ok {
			if reply != nil {
				reply <- nil
			}
			return
		}
	}
	if reply != nil {
		defer func() { reply <- nil }()
	}
	sl.begin(ctx, sl.publish(), prev != nil)
}

// publish builds a new instance of the current config, not started, and makes it the
// slot's current one: while it opens, the status is the new instance's (starting), never
// the previous one's error or stop, and a sink may deliver before its start returns.
func (sl *slot) publish() connector {
	sl.mu.Lock()
	sink, src, invalid := sl.sinkCfg, sl.srcCfg, sl.invalid
	sl.mu.Unlock()
	var c connector
	switch {
	case invalid != nil:
		c = newInvalidConnector(invalid, sl.r.log)
	case sink != nil:
		sl.r.lag.forgetSink(sink)
		c = sl.r.newSink(sink, sl.sinkCounters)
	default:
		c = sl.r.newSource(src, sl.srcCounters)
	}
	sl.cur.Store(&instance{c: c, started: time.Now()})
	return c
}

// begin starts the published instance c (its Open bounded by ctx); restart says it
// replaces an earlier one.
func (sl *slot) begin(ctx context.Context, c connector, restart bool) {
	c.begin(ctx)
	if sl.r.life.hard.Err() != nil {
		c.abandon()
	}
	if restart && c.statusOf().State != StateError {
		sl.r.log.Info(restartedLine(sl.kind, sl.key), sl.kind, sl.key)
	}
}

// supervise runs until the runtime stops; the first instance was launched by Start.
func (sl *slot) supervise() {
	defer close(sl.done)
	rt := sl.r.life
	for {
		if sl.isRemoved() {
			return
		}
		in := sl.cur.Load()
		select {
		case <-rt.soft.Done():
			sl.stopInstance(in, rt.hard)
			return
		case cmd := <-sl.cmds:
			sl.handle(cmd, in)
			continue
		case <-in.c.stopped():
		}
		// The instance ended by itself: failed (status error), or a source reached the
		// end of its input. Only a failure is restarted.
		if rt.soft.Err() != nil {
			return
		}
		if st := in.c.statusOf(); st.State != StateError || sl.stoppedByUser() {
			if !sl.idle() {
				return
			}
			continue
		}
		wait, giveUp := sl.scheduleRestart(in)
		if giveUp != "" {
			sl.r.log.Error(sl.kind+" failed for good: "+giveUp, "key", sl.key, "max_restarts", sl.policy().MaxRestarts)
			sl.r.noteGaveUp()
			if !sl.idle() {
				return
			}
			continue
		}
		sl.r.log.Warn(sl.kind+" failed; restarting", "key", sl.key, "in", wait, "restart", sl.restartCount())
		if !sl.waitRetry(wait) {
			return
		}
	}
}

// idle waits, after an instance ended and is not restarted automatically, for a command
// or the runtime's stop; it reports false on the stop.
func (sl *slot) idle() bool {
	select {
	case <-sl.r.life.soft.Done():
		return false
	case cmd := <-sl.cmds:
		sl.handle(cmd, sl.cur.Load())
		return true
	}
}

// waitRetry waits for the scheduled restart (or a command, which replaces it) and
// launches it; false on the runtime's stop.
func (sl *slot) waitRetry(wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-sl.r.life.soft.Done():
		return false
	case cmd := <-sl.cmds:
		sl.handle(cmd, sl.cur.Load())
		return true
	case <-t.C:
	}
	sl.mu.Lock()
	sl.restarts++
	sl.total++
	sl.nextRetry = time.Time{}
	sl.mu.Unlock()
	sl.r.log.Info(restartingLine(sl.kind, sl.key), sl.kind, sl.key)
	sl.launch(sl.r.life.soft, nil)
	return true
}

// scheduleRestart decides whether a failed instance is restarted and after how long;
// giveUp says why not ("" when it is).
func (sl *slot) scheduleRestart(in *instance) (wait time.Duration, giveUp string) {
	pol := sl.policy()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if time.Since(in.started) >= healthyAfter {
		sl.restarts = 0
	}
	switch {
	case in.c.unfixable():
		sl.gaveUp = true
		return 0, "a restart cannot fix this, not restarted"
	case pol.MaxRestarts == 0 || sl.restarts >= pol.MaxRestarts:
		sl.gaveUp = true
		return 0, "not restarted"
	}
	b := Backoff{Initial: pol.InitialBackoff, Max: pol.MaxBackoff}
	wait = b.Delay(int(sl.restarts) + 1)
	sl.nextRetry = time.Now().Add(wait)
	return wait, ""
}

func (sl *slot) stoppedByUser() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.userStopped
}

func (sl *slot) restartCount() uint32 {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.restarts
}

// handle carries out an operator's command on the current instance and replies to it: a
// restart once its new instance started, or once it waits for the old plugin
// (awaitPlugin).
func (sl *slot) handle(cmd command, in *instance) {
	if cmd.op == opRestart || (cmd.op == opReplace && !sl.stoppedByUser()) {
		sl.r.log.Info(restartingLine(sl.kind, sl.key), sl.kind, sl.key)
	}
	sl.stopInstance(in, cmd.ctx)
	if cmd.op == opStop || cmd.op == opRemove {
		sl.mu.Lock()
		sl.userStopped, sl.nextRetry = true, time.Time{}
		sl.removed = cmd.op == opRemove
		sl.mu.Unlock()
		cmd.reply <- nil
		return
	}
	ok, err := sl.acceptRestart(cmd)
	if err != nil || !ok {
		cmd.reply <- err // !ok: stopped by the operator, it runs the new config when restarted
		return
	}
	sl.launch(sl.r.life.soft, cmd.reply)
}

// acceptRestart takes the config a requested restart runs (re-read, or the one a reload
// hands over) and starts its counts again. It reports false, with no error, for a
// replacement of a connector the operator stopped: it runs the new config when restarted.
func (sl *slot) acceptRestart(cmd command) (bool, error) {
	if cmd.op == opReplace {
		if !sl.replaceConfig(cmd) {
			return false, nil
		}
	} else if err := sl.reload(); err != nil {
		return false, err
	}
	sl.mu.Lock()
	sl.restarts, sl.gaveUp, sl.userStopped, sl.nextRetry = 0, false, false, time.Time{}
	sl.total++
	sl.mu.Unlock()
	sl.r.log.Info(sl.kind+" restarting on request", "key", sl.key)
	return true, nil
}

// stopInstance stops in softly and waits for it; when ctx ends first it is abandoned
// (and then waited for: a runner ends promptly once abandoned).
func (sl *slot) stopInstance(in *instance, ctx context.Context) {
	if in == nil {
		return
	}
	in.c.stop()
	select {
	case <-in.c.stopped():
	case <-ctx.Done():
		in.c.abandon()
		<-in.c.stopped()
	}
	sl.mu.Lock()
	sink := sl.sinkCfg
	sl.mu.Unlock()
	if sink != nil { // its last stores are done: the offsets read before them are stale
		sl.r.lag.forgetSink(sink)
	}
}

// reload re-reads the connector's active configuration (Options.Configs) for a restart.
func (sl *slot) reload() error {
	src := sl.r.configs
	if src == nil {
		return nil
	}
	if sl.kind == KindSink {
		cfg, err := activeConfig(src.ActiveSink, sl.kind, sl.key)
		if err != nil {
			return err
		}
		sl.mu.Lock()
		sl.sinkCfg, sl.invalid = cfg, nil
		sl.mu.Unlock()
		return nil
	}
	cfg, err := activeConfig(src.ActiveSource, sl.kind, sl.key)
	if err != nil {
		return err
	}
	sl.mu.Lock()
	sl.srcCfg, sl.invalid = cfg, nil
	sl.mu.Unlock()
	return nil
}

// activeConfig reads and validates a connector's active configuration.
func activeConfig[C interface{ Validate() error }](read func(key string) (C, error), kind, key string) (C, error) {
	cfg, err := read(key)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		var zero C
		return zero, fmt.Errorf("restart %s %s: read its config: %w", kind, key, err)
	}
	return cfg, nil
}

// do sends a command to the supervisor and waits for its reply.
func (sl *slot) do(ctx context.Context, op commandOp) error {
	reply := make(chan error, 1)
	select {
	case sl.cmds <- command{op: op, ctx: ctx, reply: reply}:
	case <-sl.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-sl.done:
		// A supervisor that ends right after its reply (a removal) has both ready: the
		// reply wins.
		select {
		case err := <-reply:
			return err
		default:
			return ErrStopped
		}
	}
}

// status is the current instance's status with the slot's supervision state.
func (sl *slot) status() Status {
	in := sl.cur.Load()
	st := in.c.statusOf()
	pol := sl.policy()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	st.Restart = RestartState{Restarts: sl.restarts, Total: sl.total, MaxRestarts: pol.MaxRestarts,
		NextRetry: sl.nextRetry, GaveUp: sl.gaveUp, WaitingForPlugin: sl.waitPlugin}
	if sl.userStopped && st.State != StateError {
		st.State = StateStopped
	}
	return st
}

// failedForGood reports whether the connector failed and will not be restarted.
func (sl *slot) failedForGood() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.gaveUp
}

// noteGaveUp closes Failed once every connector failed for good.
func (r *Runtime) noteGaveUp() {
	r.mu.Lock()
	slots := r.slotList()
	r.mu.Unlock()
	if len(slots) == 0 {
		return
	}
	for _, sl := range slots {
		if !sl.failedForGood() {
			return
		}
	}
	r.failedOnce.Do(func() { close(r.failed) })
}

// slotOf returns the slot of kind and key, or ErrNotFound.
func (r *Runtime) slotOf(kind, key string) (*slot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sl := range r.slots {
		if sl.kind == kind && sl.key == key {
			return sl, nil
		}
	}
	return nil, fmt.Errorf("%w: %s %q", ErrNotFound, kind, key)
}

// errNoAdmin is returned by the offset operations on a backend without them.
var errNoAdmin = errors.New("connect: this runtime's Iggy backend cannot read or write group offsets")
