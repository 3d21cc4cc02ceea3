package iggy

// One connection, two owners. A conn is a logged-in TCP (or TLS) connection served by
// a writer goroutine (run) and a reader goroutine (readLoop). The writer takes one call
// at a time from an unbuffered channel, marks it pending, writes its frame and waits
// for the reader to deliver the reply: the protocol is lock-step. A queued
// caller never has bytes on the wire, so it can give up without harm. The reader also
// notices a connection the server closed, or an Eviction it pushed, while idle, so the
// next request goes to a new connection instead of failing.
//
// A caller whose context ends after the writer took its call abandons it: it returns
// at once (ErrOutcomeUnknown wrapping ctx's error, or a not-sent error if the writer
// had not started writing) and leaves the call, with its frame and reply buffers, to
// the conn. The writer finishes writing the frame, keeps waiting for the owed reply,
// checks it echoes the request number and operation, and discards it; only then does
// it take the next call, so the lock-step holds and a late reply is never taken as the
// answer to a later request. The connection — for a group member, the membership —
// survives. Writes and reads are bounded by the request timeout (never the caller's
// context): an owed reply that misses it, or a frame still partly written then, kills
// the connection. Any other failure kills the connection too: the call in flight gets
// ErrOutcomeUnknown (or a not-sent error if nothing was written), later callers see the
// conn dead and reconnect.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// transientPause is the wait before replaying a request answered with 57 (here) or
// sending again one answered with 58 (the link does).
const transientPause = 50 * time.Millisecond

// call is one request handed to a conn. Frame holds HeaderSize bytes of space for the
// header (the writer fills it: client id, session and request number are the
// connection's) followed by the body. Body is the caller's reply buffer.
type call struct {
	ctx   context.Context
	limit time.Time // bounds the write and the reply: the request timeout, whatever ctx says
	code  wire.Code
	frame []byte
	body  []byte // reply body buffer; grown by the reader
	done  chan struct{}

	payload []byte // result: the command payload (aliases body)
	err     error

	// set by the reader for the writer
	reply    wire.ReplyHeader
	replyErr error // decoded server error (non-fatal) or a fatal read error
	fatal    bool

	// phase says who owns the call once the writer took it (see do).
	phase atomic.Int32
}

const (
	phaseTaken     = iota // the writer has it; nothing written yet
	phaseSent             // the writer started writing it: a reply is owed
	phaseDone             // the result is set; the caller gets it
	phaseAbandoned        // the caller gave up: the call and its buffers are the conn's
)

// finish hands the result to the caller unless the caller abandoned the call.
func (cl *call) finish() {
	if cl.phase.CompareAndSwap(phaseSent, phaseDone) || cl.phase.CompareAndSwap(phaseTaken, phaseDone) {
		cl.done <- struct{}{}
	}
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// newCall returns an unpooled call of req bounded by the request timeout.
func newCall(ctx context.Context, timeout time.Duration, req wire.Request) *call {
	return &call{ctx: ctx, limit: time.Now().Add(timeout), code: req.Code(), frame: frameOf(nil, req), done: make(chan struct{}, 1)}
}

type conn struct {
	nc       net.Conn
	br       *bufio.Reader
	maxFrame uint32
	client   wire.ClientID
	session  uint64
	counter  uint64 // next metadata request number
	epoch    uint64 // which login of its link this is
	calls    chan *call
	pending  atomic.Pointer[call] // the call awaiting its reply
	replied  chan struct{}        // reader → writer: the pending call has its reply
	dead     chan struct{}        // closed when the conn is unusable
	deadErr  error                // why; written before dead is closed
	lastUsed atomic.Int64         // unix nanos of the last request
	hdr      [wire.HeaderSize]byte
	once     sync.Once
	serverV  string
	node     string // the address dialled (a seed or the cluster leader)
	routeGen uint64 // the Client's route generation when it settled on node

	retiring  chan struct{} // closed by retire: end once the call in flight is answered
	retireErr error         // why; written before retiring is closed
	retireOne sync.Once
}

func newConn(nc net.Conn, maxFrame int) *conn {
	c := &conn{
		nc:       nc,
		br:       bufio.NewReaderSize(nc, 64<<10),
		maxFrame: uint32(maxFrame),
		calls:    make(chan *call),
		replied:  make(chan struct{}, 1),
		dead:     make(chan struct{}),
		retiring: make(chan struct{}),
	}
	c.lastUsed.Store(time.Now().UnixNano())
	return c
}

// start runs the writer and reader goroutines through spawn.
func (c *conn) start(spawn func(func())) {
	spawn(c.run)
	spawn(c.readLoop)
}

// kill marks the connection unusable and closes the socket. Safe to call repeatedly.
func (c *conn) kill(err error) {
	c.once.Do(func() {
		c.deadErr = err
		close(c.dead)
		_ = c.nc.Close()
	})
}

// close kills the connection; both goroutines end.
func (c *conn) close() { c.kill(ErrClosed) }

// retire ends the connection once it is idle: the writer finishes the call it has (and
// any reply it still owes) and then kills the conn with err instead of taking another
// call; a caller still waiting to hand it one sees it dead (not sent). Safe to call
// repeatedly.
func (c *conn) retire(err error) {
	c.retireOne.Do(func() {
		c.retireErr = err
		close(c.retiring)
	})
}

func (c *conn) isDead() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

// run is the writer loop. It ends when the connection dies.
func (c *conn) run() {
	for {
		select {
		case <-c.dead:
			return
		case <-c.retiring:
			c.kill(c.retireErr)
			return
		case cl := <-c.calls:
			c.exec(cl)
			cl.finish()
		}
	}
}

// do hands cl to the writer and waits for the answer (cl.payload, cl.err). If the
// writer does not take it (dead conn, ctx ended) cl.err says it was not sent. If ctx
// ends after the writer took it, do abandons the call and returns a non-nil error at
// once: ErrOutcomeUnknown wrapping ctx's error, or a not-sent error if no byte was
// written (then nothing is owed). cl, its frame and its body then belong to the conn,
// which finishes the request and discards its reply; the caller must not touch them.
func (c *conn) do(cl *call) (abandoned error) {
	cl.phase.Store(phaseTaken)
	select {
	case c.calls <- cl:
	case <-c.dead:
		cl.err = &notSentError{&notConnectedError{c.deadErr}}
		return nil
	case <-cl.ctx.Done():
		cl.err = &notSentError{cl.ctx.Err()}
		return nil
	}
	select {
	case <-cl.done:
		return nil
	case <-cl.ctx.Done():
	}
	if cl.phase.CompareAndSwap(phaseTaken, phaseAbandoned) {
		return &notSentError{cl.ctx.Err()}
	}
	if cl.phase.CompareAndSwap(phaseSent, phaseAbandoned) {
		return &unknownError{fmt.Errorf("%w: reply abandoned (the connection discards it when it arrives)", cl.ctx.Err())}
	}
	<-cl.done // the result is set
	return nil
}

// exec performs one request on the writer goroutine and sets cl.payload/cl.err (unused
// if the caller abandoned it, but the connection is kept in step either way).
func (c *conn) exec(cl *call) {
	if err := cl.ctx.Err(); err != nil {
		cl.err = &notSentError{err}
		return
	}
	if !cl.phase.CompareAndSwap(phaseTaken, phaseSent) {
		return // abandoned before anything was written: nothing is owed
	}
	op := cl.code.Operation()
	h := wire.RequestHeader{Client: c.client, Session: c.session, Request: c.counter, Operation: op, Code: cl.code}
	switch {
	case op == wire.OpRegister:
		h.Session, h.Request = 0, 0
	case op.IsMetadata() || op == wire.OpLogout:
		c.counter++
	}
	wire.AppendRequestHeader(cl.frame[:0], h, len(cl.frame)-wire.HeaderSize)
	c.lastUsed.Store(time.Now().UnixNano())

	_ = c.nc.SetDeadline(cl.limit)
	defer func() {
		if !c.isDead() {
			_ = c.nc.SetDeadline(time.Time{}) // idle: the reader waits without a deadline
		}
	}()
	for {
		select {
		case <-c.dead:
			cl.err = &notSentError{&notConnectedError{c.deadErr}}
			return
		default:
		}
		cl.replyErr, cl.fatal = nil, false
		c.pending.Store(cl)
		n, err := c.nc.Write(cl.frame)
		if err != nil {
			c.pending.CompareAndSwap(cl, nil)
			err = c.ioCause(cl, err)
			if n == 0 {
				cl.err = &notSentError{err}
			} else {
				cl.err = &unknownError{err}
			}
			c.kill(cl.err)
			return
		}
		select {
		case <-c.replied:
		case <-c.dead:
			if c.pending.CompareAndSwap(cl, nil) { // the reader died without taking it
				cl.err = &unknownError{c.ioCause(cl, c.deadErr)}
				return
			}
			<-c.replied
		}
		if cl.phase.Load() == phaseAbandoned {
			c.discard(cl, h)
			return
		}
		if cl.fatal {
			var ev *wire.EvictionError
			switch {
			case op == wire.OpRegister && errors.As(cl.replyErr, &ev):
				cl.err = ev // a login refusal is a definite answer
			case errors.As(cl.replyErr, &ev):
				cl.err = &unknownError{ev}
			default:
				cl.err = &unknownError{c.ioCause(cl, cl.replyErr)}
			}
			return
		}
		if err := mismatch(cl.reply, h); err != nil {
			cl.err = &unknownError{err}
			c.kill(cl.err)
			return
		}
		if errors.Is(cl.replyErr, wire.ErrTransientNotCommitted) {
			// 57: replay the identical frame here. 58 (not accepted: not executed) goes
			// back to the link, which may move the request to the cluster leader.
			t := time.NewTimer(transientPause)
			select {
			case <-t.C:
			case <-cl.ctx.Done():
				t.Stop()
			}
			if cl.ctx.Err() != nil || time.Now().After(cl.limit) {
				// The reply was read: the connection is in step, nothing is owed.
				cl.err = &unknownError{fmt.Errorf("transient reply until the deadline: %w", cl.replyErr)}
				return
			}
			continue // replay the identical frame on the same connection
		}
		cl.err = cl.replyErr
		return
	}
}

// discard drops the reply of an abandoned call: the connection stays usable unless the
// read failed (the reader already killed it) or the reply answers another request.
func (c *conn) discard(cl *call, h wire.RequestHeader) {
	if cl.fatal {
		return
	}
	if err := mismatch(cl.reply, h); err != nil {
		c.kill(&unknownError{fmt.Errorf("late reply: %w", err)})
	}
}

// mismatch reports a reply that does not echo the request number and operation of
// the request it answers: the stream is desynchronised. The operation may
// also be the request's committed form (CreateTopic answered as
// CreateTopicWithAssignments: wire.Operation.AnsweredBy), which a real server sends.
func mismatch(r wire.ReplyHeader, h wire.RequestHeader) error {
	if r.Request != h.Request || !h.Operation.AnsweredBy(r.Operation) {
		return protocolErrorf("reply answers request %d (%s), sent %d (%s)", r.Request, r.Operation, h.Request, h.Operation)
	}
	return nil
}

// readLoop reads every frame. A frame with no call pending (an unsolicited Eviction)
// or any read failure kills the connection. It ends when the connection dies.
func (c *conn) readLoop() {
	for {
		_, err := io.ReadFull(c.br, c.hdr[:])
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && c.pending.Load() == nil && !c.isDead() {
				// The request timeout passed just after the reply was read, before the
				// writer cleared the read deadline.
				runtime.Gosched()
				continue
			}
			c.fail(err)
			return
		}
		fi, err := wire.ReadFrameInfo(c.hdr[:], c.maxFrame)
		if err != nil {
			c.fail(&protoError{err})
			return
		}
		cl := c.pending.Load()
		if cl == nil {
			if fi.Command == wire.CommandEviction {
				ev, derr := wire.DecodeEvictionHeader(c.hdr[:])
				if derr == nil {
					c.fail(wire.NewEvictionError(ev))
					return
				}
			}
			c.fail(protocolErrorf("unsolicited %s frame", fi.Command))
			return
		}
		n := fi.BodyLen()
		if cap(cl.body) < n {
			cl.body = make([]byte, n, n+n/4)
		}
		body := cl.body[:n]
		if _, err := io.ReadFull(c.br, body); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			c.fail(fmt.Errorf("frame body (%d bytes): %w", n, err))
			return
		}
		rh, payload, err := wire.DecodeReplyFrame(c.hdr[:], body)
		var ev *wire.EvictionError
		if errors.As(err, &ev) || errors.Is(err, wire.ErrMalformed) {
			if !errors.As(err, &ev) {
				err = &protoError{err}
			}
			c.fail(err)
			return
		}
		cl.reply, cl.payload, cl.replyErr = rh, payload, err
		c.pending.Store(nil)
		c.replied <- struct{}{}
	}
}

// fail hands a fatal reader error to the pending call (if any) and kills the conn.
func (c *conn) fail(err error) {
	if cl := c.pending.Swap(nil); cl != nil {
		cl.replyErr, cl.fatal = err, true
		c.kill(err)
		c.replied <- struct{}{}
		return
	}
	c.kill(err)
}

// ioCause explains an I/O failure: the context, the request deadline, Close, or err.
func (c *conn) ioCause(cl *call, err error) error {
	if cerr := cl.ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: no reply before the request deadline", context.DeadlineExceeded)
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("server closed the connection: %w", io.ErrUnexpectedEOF)
	}
	if c.isDead() && errors.Is(c.deadErr, ErrClosed) {
		return ErrClosed
	}
	return err
}
