package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/ferryio/ferry/connect/plugin/postcard"
	"github.com/ferryio/ferry/sdk"
)

// G3QueueLen is how many decoded batches a G3 source may hand over before its send callback
// blocks (until Read takes one or Close begins). G4 sources have one slot: one batch in flight.
const G3QueueLen = 16

// sourceRoutes maps a source's plugin id to its entry; the static send callbacks look it up.
var sourceRoutes sync.Map // uint32 → *sourceEntry

type sourceEntry struct {
	id     uint32
	lib    *Library
	queue  chan pendingBatch
	done   chan struct{} // closed when Close begins: callbacks return -1 / stop blocking
	closed atomic.Bool
}

type pendingBatch struct {
	id    uint64
	batch sdk.SourceBatch
}

// Source adapts a native source plugin to sdk.Source. Create it with [Library.NewSource].
// Read and the AckFuncs it returns may run on any goroutine; Open and Close are not
// concurrent with each other.
type Source struct {
	lib *Library

	mu      sync.Mutex
	entry   *sourceEntry  // nil when not open
	closing int           // iggy_source_close calls running (abandoned ones included)
	idle    chan struct{} // non-nil while Idle's caller waits: closed when closing is 0
}

// Idle returns a channel that is closed once no iggy_source_close of this source runs
// (already closed when none does): a close the runtime abandoned (the plugin hangs)
// keeps its OS thread until the plugin returns, and the runtime waits on Idle before it
// opens a new instance in its place.
func (s *Source) Idle() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing == 0 {
		return closedChan
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return s.idle
}

// NewSource returns an unopened source backed by the library, or a *SymbolError when the
// library lacks source symbols.
func (l *Library) NewSource() (*Source, error) {
	if err := l.CheckSource(); err != nil {
		return nil, err
	}
	return &Source{lib: l}, nil
}

// ID returns the plugin id of the open instance, 0 when not open.
func (s *Source) ID() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entry == nil {
		return 0
	}
	return s.entry.id
}

// Open allocates a new plugin id, calls iggy_source_open with env.Config and env.State (NULL
// when nil), then starts the plugin: G4 with iggy_source_handle_v2, G3 with
// iggy_source_handle. A failure closes the instance again and returns a *CallError.
func (s *Source) Open(ctx context.Context, env sdk.SourceEnv) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entry != nil {
		return fmt.Errorf("plugin %s: source %q: %w", s.lib.path, env.Key, ErrAlreadyOpen)
	}
	id := newPluginID()
	qlen := 1
	if s.lib.gen == SourceG3 {
		qlen = G3QueueLen
	}
	e := &sourceEntry{id: id, lib: s.lib, queue: make(chan pendingBatch, qlen), done: make(chan struct{})}
	s.lib.register(id, env.Key, env.Logger)
	if err := callErr(s.lib, SymSourceOpen, id, callSourceOpen(s.lib.srcOpen, id, env.Config, env.State, s.lib.slot)); err != nil {
		callClose(s.lib.srcClose, id)
		s.lib.unregister(id)
		return fmt.Errorf("open source %q: %w", env.Key, err)
	}
	sourceRoutes.Store(id, e)
	var code int32
	op := SymSourceHandleV2
	if s.lib.gen == SourceG4 {
		code = callHandleV2(s.lib.srcHandleV2, id)
	} else {
		op = SymSourceHandle
		code = callHandleV1(s.lib.srcHandle, id)
	}
	if err := callErr(s.lib, op, id, code); err != nil {
		e.closed.Store(true)
		close(e.done)
		callClose(s.lib.srcClose, id)
		sourceRoutes.Delete(id)
		s.lib.unregister(id)
		return fmt.Errorf("open source %q: %w", env.Key, err)
	}
	s.entry = e
	return nil
}

// Read returns the next batch the plugin produced, blocking until one arrives, ctx ends
// (ctx's error) or the source is closed (ErrClosed). For G4 the AckFunc calls
// iggy_source_batch_result on the calling goroutine: ACK for a nil error, NACK otherwise;
// it returns a *CallError when the plugin refuses the result (e.g. it gave up on the batch
// after its 30 s timeout), ErrClosed after Close and ErrAckTwice on a second call. For G3
// the AckFunc is sdk.NoAck: G3 has no acknowledgement, so delivery is at-most-once as far as
// the plugin is concerned (it never re-produces a batch Ferry failed to send).
func (s *Source) Read(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	s.mu.Lock()
	e := s.entry
	s.mu.Unlock()
	if e == nil {
		return sdk.SourceBatch{}, nil, fmt.Errorf("plugin %s: read: %w", s.lib.path, ErrClosed)
	}
	select {
	case <-ctx.Done():
		return sdk.SourceBatch{}, nil, ctx.Err()
	case <-e.done:
		return sdk.SourceBatch{}, nil, fmt.Errorf("plugin %s: read: %w", s.lib.path, ErrClosed)
	case b := <-e.queue:
		if s.lib.gen != SourceG4 {
			return b.batch, sdk.NoAck, nil
		}
		return b.batch, e.ackFunc(b.id), nil
	}
}

func (e *sourceEntry) ackFunc(batch uint64) sdk.AckFunc {
	var used atomic.Bool
	return func(_ context.Context, err error) error {
		if !used.CompareAndSwap(false, true) {
			return fmt.Errorf("plugin %s: batch %d: %w", e.lib.path, batch, ErrAckTwice)
		}
		if e.closed.Load() {
			return fmt.Errorf("plugin %s: ack batch %d: %w", e.lib.path, batch, ErrClosed)
		}
		var result uint8 // 0 ACK
		if err != nil {
			result = 1 // NACK
		}
		return callErr(e.lib, SymSourceBatchResult, e.id, callBatchResult(e.lib.srcBatchResult, e.id, batch, result))
	}
}

// Close makes the send callbacks refuse (G4: -1) or stop waiting (G3), then calls
// iggy_source_close, which waits for the plugin's producing thread (up to its NACK back-off,
// ≤ 5 s, for SDK plugins). Callbacks after Close return -1. If ctx ends first Close returns
// ctx's error and the plugin's close finishes on its own goroutine. Closing a source that is
// not open returns nil.
func (s *Source) Close(ctx context.Context) error {
	s.mu.Lock()
	e := s.entry
	s.entry = nil
	s.mu.Unlock()
	if e == nil {
		return nil
	}
	e.closed.Store(true)
	close(e.done)
	var code int32
	done := make(chan struct{})
	s.mu.Lock()
	s.closing++
	s.mu.Unlock()
	go func() {
		defer close(done)
		code = callClose(s.lib.srcClose, e.id)
		sourceRoutes.Delete(e.id)
		s.lib.unregister(e.id)
		s.mu.Lock()
		if s.closing--; s.closing == 0 && s.idle != nil {
			close(s.idle)
			s.idle = nil
		}
		s.mu.Unlock()
	}()
	select {
	case <-done:
		return callErr(s.lib, SymSourceClose, e.id, code)
	case <-ctx.Done():
		return fmt.Errorf("plugin %s: close source %d: %w", s.lib.path, e.id, ctx.Err())
	}
}

// decodeBatch copies and decodes a ProducedMessages buffer from the plugin.
func decodeBatch(b []byte) (sdk.SourceBatch, error) {
	p, err := postcard.DecodeProducedMessages(b)
	if err != nil {
		return sdk.SourceBatch{}, err
	}
	out := sdk.SourceBatch{Schema: p.Schema, Messages: make([]sdk.ProducedMessage, len(p.Messages))}
	for i, m := range p.Messages {
		out.Messages[i] = sdk.ProducedMessage{Headers: m.Headers, Payload: m.Payload}
		if m.HasID {
			out.Messages[i].ID = m.ID
		}
	}
	if p.HasState {
		out.State = p.State
	}
	return out, nil
}

func lookupSource(id uint32) *sourceEntry {
	v, ok := sourceRoutes.Load(id)
	if !ok {
		return nil
	}
	e := v.(*sourceEntry)
	if e.closed.Load() {
		return nil
	}
	return e
}

// sendV2 is the G4 send callback: decode, enqueue without blocking. -1 for an unknown or
// closed instance, an undecodable buffer or a full queue (the plugin NACKs and retries).
func sendV2(id uint32, batch uint64, b []byte) int32 {
	e := lookupSource(id)
	if e == nil {
		return -1
	}
	sb, err := decodeBatch(b)
	if err != nil {
		slog.Error("plugin source sent an undecodable batch", "plugin", e.lib.path, "id", id, "batch", batch, "err", err)
		return -1
	}
	select {
	case e.queue <- pendingBatch{id: batch, batch: sb}:
		return 0
	default:
		slog.Warn("plugin source sent a batch while one is in flight; refused", "plugin", e.lib.path, "id", id, "batch", batch)
		return -1
	}
}

// sendV1 is the G3 send callback: decode and enqueue, blocking while the queue is full until
// Read makes room or Close begins (a batch that arrives during Close is dropped and logged).
func sendV1(id uint32, b []byte) {
	e := lookupSource(id)
	if e == nil {
		return
	}
	sb, err := decodeBatch(b)
	if err != nil {
		slog.Error("plugin source (G3) sent an undecodable batch; dropped", "plugin", e.lib.path, "id", id, "err", err)
		return
	}
	select {
	case e.queue <- pendingBatch{batch: sb}:
	case <-e.done:
		slog.Warn("plugin source (G3) sent a batch during close; dropped", "plugin", e.lib.path, "id", id, "messages", len(sb.Messages))
	}
}

var _ sdk.Source = (*Source)(nil)

// Version is the version the plugin library reports (iggy_source_version), or "".
func (s *Source) Version() string { return s.lib.Version() }
