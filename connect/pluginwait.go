package connect

import (
	"context"
	"time"
)

// pluginCalls is implemented by native plugin adapters (connect/plugin's Sink and
// Source): Idle is closed once no call into the plugin runs for that instance.
type pluginCalls interface {
	Idle() <-chan struct{}
	Close(ctx context.Context) error
}

// pluginOf returns the native plugin of a stopped instance, if it is one, and how long
// its Close may take.
func pluginOf(c connector) (pluginCalls, time.Duration, bool) {
	switch r := c.(type) {
	case *sinkRunner:
		p, ok := r.sink.(pluginCalls)
		return p, r.cfg.ShutdownTimeout, ok
	case *sourceRunner:
		p, ok := r.src.(pluginCalls)
		return p, sourceShutdownTimeout, ok
	}
	return nil, 0, false
}

// awaitPlugin holds a new instance back while a call into prev's native plugin still
// runs. A hard stop abandons a call that does not return (a hung plugin cannot be
// interrupted): it keeps its OS thread until the plugin returns. Opening a new instance
// meanwhile would leave one more such thread behind at every restart, so the slot waits:
// its status says so (Restart.WaitingForPlugin); a restart asked for meanwhile is answered
// at once (this launch is it), a stop cancels the launch. Once the call returned, prev's
// plugin instance is closed (its own Close was abandoned too), then the launch goes on.
// A restart that asked for this launch (reply not nil) is answered when the wait begins
// (replied). ok is false when the launch is cancelled (a stop, or the runtime stopping).
func (sl *slot) awaitPlugin(prev *instance, reply chan<- error) (ok, replied bool) {
	p, closeTimeout, isPlugin := pluginOf(prev.c)
	if !isPlugin {
		return true, false
	}
	idle := p.Idle()
	select {
	case <-idle:
		return true, false
	default:
	}
	if reply != nil {
		reply <- nil
		replied = true
	}
	sl.setWaitPlugin(true)
	defer sl.setWaitPlugin(false)
	sl.r.log.Warn(sl.kind+" not reopened yet: a call into its plugin from the stopped instance has not returned", "key", sl.key)
	for waiting := true; waiting; {
		select {
		case <-sl.r.life.soft.Done():
			return false, replied
		case cmd := <-sl.cmds:
			if cmd.op == opStop || cmd.op == opRemove {
				sl.mu.Lock()
				sl.userStopped, sl.nextRetry = true, time.Time{}
				sl.removed = cmd.op == opRemove
				sl.mu.Unlock()
				cmd.reply <- nil
				return false, replied
			}
			_, err := sl.acceptRestart(cmd) // this pending launch is that restart (or takes its config)
			cmd.reply <- err
		case <-idle:
			waiting = false
		}
	}
	sl.r.log.Info(sl.kind+" plugin call returned; closing the stopped instance and reopening", "key", sl.key)
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	err := callSafely(func() error { return p.Close(ctx) })
	cancel()
	if err != nil {
		sl.r.log.Warn(sl.kind+" closing the stopped instance's plugin", "key", sl.key, "error", err)
	}
	return true, replied
}

func (sl *slot) setWaitPlugin(on bool) {
	sl.mu.Lock()
	sl.waitPlugin = on
	sl.mu.Unlock()
}
