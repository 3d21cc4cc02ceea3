package iggy

// A link is a logical connection that survives failures: it holds at most one live conn
// and replaces it (dial, log in with a new client id, run onConnect) when it dies, with
// exponential backoff shared by every caller. Requests go through roundTrip, which
// applies the request budget and the transparent-retry rules.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

type link struct {
	cl   *Client
	name string
	// onConnect runs on every new conn after login, before anyone else uses it (rejoin
	// groups). It must only use conn.do.
	onConnect func(ctx context.Context, c *conn) error

	inflight atomic.Int32

	mu       sync.Mutex
	cur      *conn
	epoch    uint64
	dialing  chan struct{} // non-nil while one caller dials; closed when it is done
	next     time.Time     // earliest next dial
	backoff  time.Duration
	failures int
	lastErr  error
	closed   bool
}

// newLink returns a link of cl, registered so that a leader change reaches it.
func newLink(cl *Client, name string) *link {
	l := &link{cl: cl, name: name, backoff: cl.cfg.reconnInitial}
	cl.mu.Lock()
	cl.links[l] = struct{}{}
	cl.mu.Unlock()
	return l
}

// current returns the live conn, or nil.
func (l *link) current() *conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil && !l.cur.isDead() {
		return l.cur
	}
	return nil
}

// get returns a live conn, connecting (with backoff) if needed, until ctx ends.
func (l *link) get(ctx context.Context) (*conn, error) {
	l.mu.Lock()
	for {
		if l.closed {
			l.mu.Unlock()
			return nil, &notSentError{ErrClosed}
		}
		if c := l.cur; c != nil {
			if !c.isDead() {
				l.mu.Unlock()
				if l.offLeader(c) {
					l.retireOffLeader() // a leader change raced with this conn's connect
					l.mu.Lock()
					continue
				}
				return c, nil
			}
			l.cur = nil
			if !errors.Is(c.deadErr, errLeaderMoved) {
				l.cl.cfg.logger.Warn("iggy: connection lost", "link", l.name, "err", c.deadErr)
			}
		}
		if ch := l.dialing; ch != nil {
			l.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, l.notConnected(ctx.Err())
			}
			l.mu.Lock()
			continue
		}
		if max := l.cl.cfg.reconnAttempts; max > 0 && l.failures >= max {
			err := l.lastErr
			l.failures = 0 // a later request may try again
			l.mu.Unlock()
			return nil, &notConnectedError{fmt.Errorf("%d attempts failed: %w", max, err)}
		}
		if wait := time.Until(l.next); wait > 0 {
			l.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, l.notConnected(ctx.Err())
			}
			l.mu.Lock()
			continue
		}
		ch := make(chan struct{})
		l.dialing = ch
		l.mu.Unlock()

		c, err := l.cl.connect(ctx, l)

		l.mu.Lock()
		l.dialing = nil
		close(ch)
		if err == nil {
			if l.closed {
				c.close()
				continue
			}
			l.epoch++
			c.epoch = l.epoch
			l.cur, l.failures, l.backoff, l.lastErr = c, 0, l.cl.cfg.reconnInitial, nil
			l.mu.Unlock()
			return c, nil
		}
		l.failures++
		l.lastErr = err
		l.next = time.Now().Add(l.backoff)
		l.backoff = min(2*l.backoff, l.cl.cfg.reconnMax)
		if permanent(err) || ctx.Err() != nil || errors.Is(err, errFailRequest) {
			l.mu.Unlock()
			return nil, &notConnectedError{err}
		}
		l.cl.cfg.logger.Warn("iggy: connect failed, retrying", "link", l.name, "err", err, "attempt", l.failures)
	}
}

func (l *link) notConnected(ctxErr error) error {
	l.mu.Lock()
	last := l.lastErr
	l.mu.Unlock()
	if last == nil {
		return &notConnectedError{ctxErr}
	}
	return &notConnectedError{fmt.Errorf("%w (last attempt: %w)", ctxErr, last)}
}

// errFailRequest marks an onConnect error that fails the request that dialled rather than
// being retried on its behalf: the hook found that what the request was made for no
// longer holds (a consumer's topic was replaced). The next request dials again.
var errFailRequest = errors.New("iggy: the new connection refused the request that opened it")

// permanent reports whether a connect error will not go away by retrying.
func permanent(err error) bool {
	return errors.Is(err, wire.ErrInvalidCredentials) || errors.Is(err, wire.ErrInvalidPAT) ||
		errors.Is(err, wire.ErrIncompatibleProtocolVersion) || errors.Is(err, wire.ErrInvalidFormat) ||
		errors.Is(err, ErrClosed)
}

// offLeader reports whether c is on a node other than the leader the route learned
// after c settled.
func (l *link) offLeader(c *conn) bool {
	leader, gen := l.cl.route.current()
	return c.routeGen != gen && leader != "" && !sameAddr(c.node, leader)
}

// close closes the link and its conn. Calls in flight get ErrOutcomeUnknown/ErrClosed.
func (l *link) close() {
	l.mu.Lock()
	l.closed = true
	c := l.cur
	l.cur = nil
	l.mu.Unlock()
	l.cl.mu.Lock()
	delete(l.cl.links, l)
	l.cl.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// result is the outcome of one roundTrip.
type result struct {
	payload []byte // aliases body
	body    []byte // the reply buffer (give it back to the caller's pool)
	epoch   uint64 // the login the reply came from
	err     error
	// abandoned: ctx ended after the request was handed to a conn, which kept frame and
	// body (to finish the request and discard its reply); the caller must drop both.
	abandoned bool
}

// roundTrip sends frame (HeaderSize bytes of header space, then the body) and returns
// the reply payload read into body. If ctx ends once a conn took the request, the
// result is abandoned: the conn kept frame and body (see conn.do). Reads (idem) are retried on a new connection when
// their outcome is unknown; requests that were not sent, or refused with 58
// TransientNotAccepted (not executed; the roster is read again, see notAccepted), are
// always retried; all within one budget: the request timeout or ctx's deadline,
// whichever is sooner.
func (l *link) roundTrip(ctx context.Context, code wire.Code, frame, body []byte, idem bool) result {
	l.inflight.Add(1)
	defer l.inflight.Add(-1)
	limit := time.Now().Add(l.cl.cfg.timeout)
	deadline := limit
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	cl := callPool.Get().(*call)
	var rechecked time.Time // the last roster read for a 58 answer
	for {
		c, err := l.get(rctx)
		if err != nil {
			if ctx.Err() == nil && rctx.Err() != nil {
				err = fmt.Errorf("request timeout %v: %w", l.cl.cfg.timeout, err)
			}
			putCall(cl)
			return result{body: body, err: err}
		}
		cl.ctx, cl.limit, cl.code, cl.frame, cl.body = rctx, limit, code, frame, body
		cl.payload, cl.err = nil, nil
		if err := c.do(cl); err != nil {
			// Abandoned: cl, frame and body now belong to the conn.
			return result{epoch: c.epoch, err: err, abandoned: true}
		}
		body = cl.body
		if errors.Is(cl.err, wire.ErrTransientNotAccepted) {
			if l.notAccepted(rctx, c, &rechecked); rctx.Err() == nil {
				continue // not executed: send it again (to the leader if it moved)
			}
			cl.err = fmt.Errorf("transient reply until the deadline: %w", cl.err)
		}
		if cl.err == nil || !connLevel(cl.err) || rctx.Err() != nil {
			r := result{payload: cl.payload, body: body, epoch: c.epoch, err: cl.err}
			putCall(cl)
			return r
		}
		var ns *notSentError
		if !idem && !errors.As(cl.err, &ns) {
			r := result{body: body, epoch: c.epoch, err: cl.err}
			putCall(cl)
			return r
		}
		// Not sent, or a read whose outcome is unknown: try again on a new conn.
	}
}

// putCall resets cl and returns it to the pool.
func putCall(cl *call) {
	done := cl.done
	*cl = call{}
	cl.done = done
	callPool.Put(cl)
}

// heartbeat pings the link's conn whenever it has been idle for the heartbeat interval,
// until ctx ends. It does not reconnect a dead conn (the next request does).
func (l *link) heartbeat(ctx context.Context) {
	every := l.cl.cfg.heartbeat
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c := l.current()
		if c == nil || time.Since(time.Unix(0, c.lastUsed.Load())) < every {
			continue
		}
		if err := l.cl.simple(ctx, l, wire.PingRequest{}, true, nil); err != nil && ctx.Err() == nil {
			l.cl.cfg.logger.Debug("iggy: heartbeat ping failed", "link", l.name, "err", err)
		}
	}
}
