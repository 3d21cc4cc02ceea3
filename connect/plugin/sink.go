package plugin

import (
	"context"
	"fmt"
	"sync"

	"github.com/ferryio/ferry/connect/plugin/postcard"
	"github.com/ferryio/ferry/sdk"
)

// commitRoutes maps a sink's plugin id to the sdk.Committer given at open; the static commit
// callback looks commits up here. An entry exists from just before
// iggy_sink_set_commit_callback until iggy_sink_close returned.
var commitRoutes sync.Map // uint32 → sdk.Committer

// Sink adapts a native sink plugin to sdk.Sink. Create it with [Library.NewSink]. Consume may
// run concurrently for different topics; Open and Close are not concurrent with each other.
// After Close the Sink may be opened again (with a new plugin id).
type Sink struct {
	lib *Library

	mu        sync.Mutex
	id        uint32 // 0 when not open
	closing   bool
	inflight  int
	drained   chan struct{} // closed when inflight drops to 0 while closing
	closeDone chan struct{} // non-nil while iggy_sink_close runs
	closeErr  error         // outcome of the last plugin close
	idle      chan struct{} // non-nil while Idle's caller waits: closed when no call runs

	bufMu sync.Mutex
	bufs  map[bufKey]*topicBuf
	// told holds the topics whose ids the plugin was told (iggy_sink_set_topic_ids), for
	// the open instance.
	told map[sdk.TopicMetadata]bool
}

// bufKey names the encode buffers of one partition of one topic: the calls for one
// partition are sequential (with max_in_flight > 1, those for one topic are not), so after
// warm-up Consume allocates nothing for encoding.
type bufKey struct {
	topic     sdk.TopicMetadata
	partition uint32
}

// topicBuf holds the reused encode buffers of one partition of a topic.
type topicBuf struct {
	mu        sync.Mutex
	topicMeta []byte
	meta      []byte
	msgs      []byte
	enc       postcard.Encoder
}

// NewSink returns an unopened sink backed by the library, or a *SymbolError when the library
// lacks sink symbols.
func (l *Library) NewSink() (*Sink, error) {
	if err := l.CheckSink(); err != nil {
		return nil, err
	}
	return &Sink{lib: l, bufs: map[bufKey]*topicBuf{}, told: map[sdk.TopicMetadata]bool{}}, nil
}

// ID returns the plugin id of the open instance, 0 when not open.
func (s *Sink) ID() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// CheckCommit returns the error Open returns when the sink of connector key is opened with a
// Committer (offset_commit = "sink_controlled") and the library lacks
// iggy_sink_set_commit_callback: it wraps ErrCommitUnsupported. Nil when the library has it.
// The runtime and `ferry check` ask it before opening anything.
func (s *Sink) CheckCommit(key string) error {
	if s.lib.sinkSetCommit == nil {
		return fmt.Errorf("plugin %s (connector %q): offset_commit = sink_controlled needs symbol %s: %w",
			s.lib.path, key, SymSinkSetCommit, ErrCommitUnsupported)
	}
	return nil
}

// Open allocates a new plugin id and calls iggy_sink_open with env.Config. When
// env.Committer is non-nil the library must export iggy_sink_set_commit_callback (else an
// error wrapping ErrCommitUnsupported, before anything is opened); it is called right after
// a successful open. A failed open is closed again at once (the SDK keeps failed instances
// registered) and returns a *CallError (ErrPluginRejected for an unusable config,
// ErrPluginFailed when the plugin's open failed). ctx is checked before the call but cannot
// interrupt the plugin.
func (s *Sink) Open(ctx context.Context, env sdk.SinkEnv) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if env.Committer != nil {
		if err := s.CheckCommit(env.Key); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id != 0 {
		return fmt.Errorf("plugin %s: sink %q: %w", s.lib.path, env.Key, ErrAlreadyOpen)
	}
	id := newPluginID()
	s.lib.register(id, env.Key, env.Logger)
	if err := callErr(s.lib, SymSinkOpen, id, callSinkOpen(s.lib.sinkOpen, id, env.Config, s.lib.slot)); err != nil {
		callClose(s.lib.sinkClose, id)
		s.lib.unregister(id)
		return fmt.Errorf("open sink %q: %w", env.Key, err)
	}
	if env.Committer != nil {
		commitRoutes.Store(id, env.Committer)
		if err := callErr(s.lib, SymSinkSetCommit, id, callSetCommit(s.lib.sinkSetCommit, id)); err != nil {
			callClose(s.lib.sinkClose, id)
			commitRoutes.Delete(id)
			s.lib.unregister(id)
			return fmt.Errorf("open sink %q: %w", env.Key, err)
		}
	}
	s.id, s.closing, s.inflight, s.drained = id, false, 0, nil
	return nil
}

func (s *Sink) enter() (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == 0 || s.closing {
		return 0, ErrClosed
	}
	s.inflight++
	return s.id, nil
}

func (s *Sink) leave() {
	s.mu.Lock()
	s.inflight--
	if s.inflight == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
	s.signalIdleLocked()
	s.mu.Unlock()
}

// closedChan is the channel Idle returns when no call runs.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Idle returns a channel that is closed once no call into the plugin runs for this
// sink: no iggy_sink_consume and no iggy_sink_close (already closed when none does). A
// call the runtime abandoned (the plugin hangs) keeps its OS thread until the plugin
// returns; the runtime waits on Idle before it opens a new instance in its place, so
// a hung plugin holds at most one such call per instance and topic.
func (s *Sink) Idle() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight == 0 && s.closeDone == nil {
		return closedChan
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return s.idle
}

func (s *Sink) signalIdleLocked() {
	if s.inflight == 0 && s.closeDone == nil && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// topicBuf returns the buffers of topic t, made at its first batch. A library that exports
// iggy_sink_set_topic_ids is told t's names and ids then, before that batch, so a plugin that
// only sees the names (one built with Iggy's SDK) can address the commit callback; if the
// plugin refuses them the buffers are not kept and the next batch tells it again.
func (s *Sink) topicBuf(id uint32, t sdk.TopicMetadata, partition uint32) (*topicBuf, error) {
	s.bufMu.Lock()
	defer s.bufMu.Unlock()
	if !s.told[t] && s.lib.sinkSetTopicIDs != nil {
		code := callSetTopicIDs(s.lib.sinkSetTopicIDs, id, t.Stream, t.Topic, t.StreamID, t.TopicID)
		if err := callErr(s.lib, SymSinkSetTopicIDs, id, code); err != nil {
			return nil, fmt.Errorf("plugin %s: topic %s/%s: %w", s.lib.path, t.Stream, t.Topic, err)
		}
	}
	s.told[t] = true
	k := bufKey{t, partition}
	b, ok := s.bufs[k]
	if !ok {
		b = &topicBuf{topicMeta: postcard.AppendTopicMetadata(nil, t)}
		s.bufs[k] = b
	}
	return b, nil
}

// MaxInFlight implements sdk.ConcurrentSink: a native plugin's ABI says nothing about
// concurrent calls for one topic, so the connector file's max_in_flight is the user's
// statement that the plugin allows them, and the adapter never limits it.
func (s *Sink) MaxInFlight() int { return sdk.MaxConcurrentUnlimited }

// Consume encodes the batch (TopicMetadata with Ferry's appended stream/topic ids,
// MessagesMetadata, RawMessages with meta.Schema) into per-topic reused buffers and calls
// iggy_sink_consume, blocking until the plugin returns. Errors: ErrClosed when not open; a
// *CallError wrapping ErrPluginFailed (code 1) or ErrPluginRejected (code -1: undecodable
// buffers or unknown instance); an encoding error for an unknown schema or header kind. ctx
// is checked before the call but cannot interrupt the plugin. Safe for concurrent use for
// different topics.
func (s *Sink) Consume(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id, err := s.enter()
	if err != nil {
		return fmt.Errorf("plugin %s: consume: %w", s.lib.path, err)
	}
	defer s.leave()
	b, err := s.topicBuf(id, topic, meta.Partition.PartitionID)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.meta, err = postcard.AppendMessagesMetadata(b.meta[:0], meta); err != nil {
		return fmt.Errorf("plugin %s: encode messages metadata: %w", s.lib.path, err)
	}
	if b.msgs, err = b.enc.AppendRawMessages(b.msgs[:0], meta.Schema, msgs); err != nil {
		return fmt.Errorf("plugin %s: encode messages: %w", s.lib.path, err)
	}
	return callErr(s.lib, SymSinkConsume, id, callSinkConsume(s.lib.sinkConsume, id, b.topicMeta, b.meta, b.msgs))
}

// Close stops new Consume calls, waits for the in-flight ones, calls iggy_sink_close (the
// plugin may still commit meanwhile), then removes the commit routing so a later commit
// callback returns -1. If ctx ends while waiting for in-flight calls, Close returns ctx's
// error and the sink stays open (Close may be retried). If ctx ends during the plugin's
// close, Close returns ctx's error; the plugin's close continues on its own goroutine, the
// routing is removed when it returns, and a retried Close waits for it. A non-zero code from
// the plugin is returned as a *CallError (the instance is gone either way). Closing a sink
// that is not open returns nil.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	id := s.id
	if id == 0 {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	var wait chan struct{}
	if s.inflight > 0 {
		if s.drained == nil {
			s.drained = make(chan struct{})
		}
		wait = s.drained
	}
	s.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			s.mu.Lock()
			if s.closeDone == nil {
				s.closing = false
			}
			s.mu.Unlock()
			return fmt.Errorf("plugin %s: close sink %d: waiting for consume: %w", s.lib.path, id, ctx.Err())
		}
	}
	s.mu.Lock()
	if s.closeDone == nil {
		s.closeDone = make(chan struct{})
		go s.closePlugin(id, s.closeDone)
	}
	done := s.closeDone
	s.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("plugin %s: close sink %d: %w", s.lib.path, id, ctx.Err())
	}
	s.mu.Lock()
	err := s.closeErr
	s.mu.Unlock()
	return err
}

// closePlugin calls iggy_sink_close, then drops the commit routing and the log attribution.
func (s *Sink) closePlugin(id uint32, done chan struct{}) {
	code := callClose(s.lib.sinkClose, id)
	commitRoutes.Delete(id)
	s.lib.unregister(id)
	s.bufMu.Lock()
	clear(s.bufs)
	clear(s.told)
	s.bufMu.Unlock()
	s.mu.Lock()
	s.id, s.closing, s.closeDone = 0, false, nil
	s.closeErr = callErr(s.lib, SymSinkClose, id, code)
	s.signalIdleLocked()
	s.mu.Unlock()
	close(done)
}

var _ sdk.Sink = (*Sink)(nil)

// Version is the version the plugin library reports (iggy_sink_version), or "".
func (s *Sink) Version() string { return s.lib.Version() }
