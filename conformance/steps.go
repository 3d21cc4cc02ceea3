package conformance

import (
	"context"
	"errors"
)

// setup is how a scenario's run begins (see Runner.begin).
type setup struct {
	partitions uint32
	conn       connector
	// before messages per partition are produced before the runtime starts, with payload
	// (nil = the default payloads; see fixture.produce).
	before  int
	payload func(p uint32, i int) ([]byte, bool)
	// after messages per partition are produced once the runtime opened the probe.
	after int
	// addr is the address the runtime is given ("" = the server's), e.g. a fault proxy's.
	addr string
	// http turns the runtime's HTTP API and metrics on at a free loopback port.
	http bool
}

// notStarted marks the error of a runtime that did not start (exited or never opened the
// probe): the scenario is "not supported" by it, not failed. Its text is the cause's.
type notStarted struct{ err error }

func (e notStarted) Error() string { return e.err.Error() }
func (e notStarted) Unwrap() error { return e.err }

// begin is every scenario's prologue: a fixture, the messages produced before the start,
// one runtime instance started and the messages produced after it. The error goes to
// outcome: a runtime that did not start makes the run "not supported", any other error
// (the suite's set-up, producing) fails it. The caller kills the process.
func (r *Runner) begin(ctx context.Context, scenario, mode string, s setup) (*fixture, *proc, error) {
	f, err := r.newFixture(ctx, scenario, mode, s.partitions, s.conn)
	if err != nil {
		return nil, nil, err
	}
	if s.addr != "" {
		f.addr = s.addr
	}
	if s.http {
		if f.http, err = freeLoopback(); err != nil {
			return nil, nil, err
		}
	}
	if s.before > 0 {
		if err := f.produce(ctx, s.before, s.payload); err != nil {
			return nil, nil, err
		}
	}
	p, err := f.start(ctx, nil)
	if err != nil {
		return nil, nil, notStarted{err}
	}
	if s.after > 0 {
		if err := f.produce(ctx, s.after, nil); err != nil {
			p.kill()
			return nil, nil, err
		}
	}
	return f, p, nil
}

// outcome is the result of a run that ended in err: "not supported" when the runtime did
// not start (notStarted), else "fail". The observed text is the error's.
func outcome(expected string, err error) Result {
	if errors.As(err, new(notStarted)) {
		return unsupported(expected, err)
	}
	return broken(expected, err)
}

// finish is every scenario's epilogue: settle (wait for the stored offsets to reach the
// end, then stop procs), then judge the tally. judge returns the observed text and whether
// the promise held; a settle error fails the run with its text.
func (f *fixture) finish(ctx context.Context, expected string, judge func(t tally) (string, bool), procs ...*proc) Result {
	if err := f.settle(ctx, procs...); err != nil {
		return broken(expected, err)
	}
	t := f.tally()
	obs, ok := judge(t)
	return verdict(expected, obs, ok, t)
}

// promise picks a scenario's expected text by mode: atLeastOnce's promise or
// after_polling's (at-most-once) one.
func promise(mode, atLeast, atMost string) string {
	if atLeastOnce(mode) {
		return atLeast
	}
	return atMost
}

// noLoss reports whether t keeps mode's promise about loss: none under at-least-once,
// anything under after_polling.
func noLoss(mode string, t tally) bool { return !atLeastOnce(mode) || t.lost == 0 }

// exactlyOnce judges a run that must deliver every message once: the tally is the
// observed text.
func exactlyOnce(t tally) (string, bool) {
	return t.String(), t.lost == 0 && t.duplicated == 0 && t.clean()
}
