package connect

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// Dead-letter header keys (string keys). ferry-error and the stream/topic names are strings,
// ferry-source-partition a uint32 and ferry-source-offset a uint64 header value.
const (
	HeaderError           = "ferry-error"
	HeaderSourceStream    = "ferry-source-stream"
	HeaderSourceTopic     = "ferry-source-topic"
	HeaderSourcePartition = "ferry-source-partition"
	HeaderSourceOffset    = "ferry-source-offset"
	// HeaderStage names where a message was rejected: decode or transform (a sink's
	// poison message), consume (a batch the sink failed, or a message it rejected), encode,
	// transform or send (a source's).
	HeaderStage = "ferry-stage"
	// HeaderSource is the key of the source connector whose message was rejected.
	HeaderSource = "ferry-source"
)

// maxHeaderValue is Iggy's limit on one header value.
const maxHeaderValue = 255

// failurePolicy is what a connector's on_failure, [retry] and [dead_letter] mean, decided
// once when the connector is made (sinkFailurePolicy, sourceFailurePolicy), as
// commitPolicy is for offset_commit. Every path on which messages fail for good calls
// apply, the one place that chooses between stop, skip and dead_letter, sends the dead
// letters, counts and logs:
//
//	sink:   a batch whose Consume retries ran out or whose error is sdk.Permanent,
//	        the messages a sink rejected (sdk.RejectedMessages), poison messages
//	        (failed decode or a transform);
//	source: a batch Iggy refused on every attempt, messages that failed encode or a
//	        transform.
//
// What each path does with the verdict (which offsets are resolved, whether the source is
// acked) stays with the path: docs/architecture.md, "When messages fail".
type failurePolicy struct {
	onFailure config.FailurePolicy
	who       string // "sink" or "source", for logs
	// consume paces a sink's Consume retries: Attempts = max_retries + 1.
	consume Backoff
	// resend paces dead-letter sends, which go on until Iggy confirms them or the stop: a
	// failed message is never dropped because the dead-letter topic was briefly
	// unreachable.
	resend   Backoff
	dlq      producer // on_failure = dead_letter; set when the connector connects
	dlqTopic string   // stream/topic, for logs
	// onSendError is told of each failed dead-letter send (a source counts it and shows it
	// in its status); nil for none.
	onSendError           func(error)
	deadLettered, skipped *atomic.Uint64
	log                   *slog.Logger
}

// deadLetterTopic returns the dead-letter topic when messages that fail go there.
func (p *failurePolicy) deadLetterTopic(dl config.DeadLetter) (config.DeadLetter, bool) {
	return config.DeadLetterTopic(p.onFailure, dl)
}

// stops reports whether a failure stops the connector (on_failure = stop): nothing at or
// after the failed messages may be acknowledged or committed.
func (p *failurePolicy) stops() bool { return p.onFailure == config.FailureStop }

// String is the policy as a file writes it, for logs.
func (p *failurePolicy) String() string { return string(p.onFailure) }

func sinkFailurePolicy(cfg *config.Sink, c *Counters, log *slog.Logger) *failurePolicy {
	r := cfg.Retry
	return &failurePolicy{onFailure: cfg.OnFailure, who: "sink",
		consume:      Backoff{Initial: r.InitialBackoff, Max: r.MaxBackoff, Attempts: r.MaxRetries + 1},
		resend:       Backoff{Initial: r.InitialBackoff, Max: r.MaxBackoff},
		dlqTopic:     cfg.DeadLetter.Stream + "/" + cfg.DeadLetter.Topic,
		deadLettered: &c.DeadLettered, skipped: &c.Skipped, log: log}
}

func sourceFailurePolicy(cfg *config.Source, c *sourceCounters, onSendError func(error), log *slog.Logger) *failurePolicy {
	return &failurePolicy{onFailure: cfg.OnFailure, who: "source", resend: sourceBackoff,
		dlqTopic:    cfg.DeadLetter.Stream + "/" + cfg.DeadLetter.Topic,
		onSendError: onSendError, deadLettered: &c.deadLetter, skipped: &c.skipped, log: log}
}

// verdict is what apply did with the failed messages.
type verdict int

const (
	// movedOn: skipped or dead-lettered (confirmed by Iggy); the connector goes past them.
	movedOn verdict = iota
	// mustStop: on_failure = stop; the connector stops with the error apply returned.
	mustStop
	// unsent: the runtime stopped before Iggy confirmed the dead letters; nothing may be
	// committed or acked past them.
	unsent
)

// failure is a set of messages that failed for good at one stage, for apply.
type failure struct {
	what  string // for the log line: "batch failed after retries", "message failed decode", …
	stage string // ferry-stage of the dead letters
	cause error
	// The messages: a sink's as polled (copied when dead-lettered), or a source's as
	// produced.
	consumed []sdk.ConsumedMessage
	produced []sdk.ProducedMessage
	// origin are the headers that say where the messages came from (source stream, topic
	// and partition; or the source connector's key). A sink's dead letters also get each
	// message's ferry-source-offset.
	origin []sdk.Header
	// each, when set, gives every message its own stage and cause (messages that each
	// failed decode, encode or a transform on their own), in the order of consumed, then
	// produced.
	each  []messageFailure
	attrs []any // log attributes
}

// messageFailure is why one message failed.
type messageFailure struct {
	stage string
	cause error
}

func (f *failure) count() int { return len(f.consumed) + len(f.produced) }

// sinkFailure describes messages of one partition of a sink's topic.
func sinkFailure(what, stage string, cause error, topic sdk.TopicMetadata, partition uint32, msgs []sdk.ConsumedMessage) failure {
	attrs := []any{"stream", topic.Stream, "topic", topic.Topic, "partition", partition}
	if len(msgs) > 0 {
		attrs = append(attrs, "first_offset", msgs[0].Offset, "last_offset", msgs[len(msgs)-1].Offset)
	}
	return failure{what: what, stage: stage, cause: cause, consumed: msgs, attrs: attrs,
		origin: []sdk.Header{
			{Key: sdk.String(HeaderSourceStream), Value: sdk.String(topic.Stream)},
			{Key: sdk.String(HeaderSourceTopic), Value: sdk.String(topic.Topic)},
			{Key: sdk.String(HeaderSourcePartition), Value: uint32Field(partition)},
		}}
}

// poisonFailure describes a batch's poison messages (all of one partition), each with its
// own stage and cause; the first one's is the failure's.
func poisonFailure(topic sdk.TopicMetadata, partition uint32, poison []poisoned) failure {
	msgs := make([]sdk.ConsumedMessage, len(poison))
	for i, m := range poison {
		msgs[i] = m.msg
	}
	what := "message failed " + poison[0].stage
	if len(poison) > 1 {
		what = fmt.Sprintf("%d messages failed decode or a transform", len(poison))
	}
	f := sinkFailure(what, poison[0].stage, poison[0].cause(), topic, partition, msgs)
	for _, m := range poison {
		f.each = append(f.each, messageFailure{m.stage, m.cause()})
	}
	return f
}

// sourceFailure describes messages a source produced.
func sourceFailure(what, stage string, cause error, key string, msgs []sdk.ProducedMessage) failure {
	return failure{what: what, stage: stage, cause: cause, produced: msgs,
		origin: []sdk.Header{{Key: sdk.String(HeaderSource), Value: sdk.String(key)}}}
}

// apply carries out on_failure for f: skip counts the messages; dead_letter sends them to
// the dead-letter topic and counts them once Iggy confirmed them (retrying the send with
// backoff until ctx ends: then unsent); stop returns mustStop with the error to stop on.
func (p *failurePolicy) apply(ctx context.Context, f failure) (verdict, error) {
	n := uint64(f.count())
	attrs := append(f.attrs, "messages", n, "stage", f.stage, "error", f.cause)
	switch p.onFailure {
	case config.FailureSkip:
		p.skipped.Add(n)
		p.log.Warn(f.what+"; skipped (on_failure = skip)", attrs...)
		return movedOn, nil
	case config.FailureDeadLetter:
		if err := p.sendDeadLetters(ctx, deadLetters(f)); err != nil {
			p.log.Warn(f.what+"; not dead-lettered before the stop", append(attrs, "send_error", err)...)
			return unsent, err
		}
		p.deadLettered.Add(n)
		p.log.Warn(f.what+"; sent to the dead-letter topic", append(attrs, "dead_letter", p.dlqTopic)...)
		return movedOn, nil
	}
	p.log.Error(f.what+"; stopping the "+p.who+" (on_failure = stop)", attrs...)
	return mustStop, f.cause
}

// sendDeadLetters sends out to the dead-letter topic, retrying with p.resend until Iggy
// confirms it or ctx ends (then an error wrapping ErrAbandoned).
func (p *failurePolicy) sendDeadLetters(ctx context.Context, out []sdk.ProducedMessage) error {
	if p.dlq == nil {
		return fmt.Errorf("%w: dead_letter: no dead-letter producer", ErrAbandoned)
	}
	err := retry(ctx, p.resend, func(int) error { return p.dlq.send(ctx, out) }, func(attempt int, err error, wait time.Duration) {
		if p.onSendError != nil {
			p.onSendError(err)
		}
		p.log.Warn("dead-letter send failed; retrying", "attempt", attempt, "backoff", wait, "error", err)
	})
	if err != nil {
		return fmt.Errorf("%w: dead-letter send: %w", ErrAbandoned, err)
	}
	return nil
}

// maxDeadLetterUserHeaders is how many bytes of a message's own headers its dead letter
// keeps: Iggy's limit less room for the ferry-* headers (each value at most
// maxHeaderValue bytes). A message with more (a source's, refused for them) goes without.
const maxDeadLetterUserHeaders = wire.MaxUserHeadersBytes - 8*(headerWireSize+32+maxHeaderValue)

// deadLetters is the one dead-letter builder. Each message keeps its payload (a source's
// cut to Iggy's limit), its id (a sink's is left zero so Iggy assigns a new one) and its
// user headers (none when they are over maxDeadLetterUserHeaders), less any ferry-*
// header, which the new ones replace: ferry-error, ferry-stage, f.origin, and, for a sink's
// message, ferry-source-offset. A sink's payload and headers are copied (they alias the
// poll buffer).
func deadLetters(f failure) []sdk.ProducedMessage {
	letter := func(stage string, cause error, id sdk.MessageID, hs []sdk.Header, payload []byte, offset *uint64) sdk.ProducedMessage {
		errText := "unknown error"
		if cause != nil {
			if t := truncateUTF8(cause.Error(), maxHeaderValue); t != "" {
				errText = t
			}
		}
		out := make([]sdk.Header, 0, len(hs)+len(f.origin)+3)
		if headersSize(hs) <= maxDeadLetterUserHeaders { // else refused for them: left out
			for _, h := range hs {
				if h.Key.Kind == sdk.HeaderString && isFerryHeader(string(h.Key.Value)) {
					continue
				}
				out = append(out, sdk.Header{Key: cloneField(h.Key), Value: cloneField(h.Value)})
			}
		}
		out = append(out, sdk.Header{Key: sdk.String(HeaderError), Value: sdk.String(errText)},
			sdk.Header{Key: sdk.String(HeaderStage), Value: sdk.String(stage)})
		out = append(out, f.origin...)
		if offset != nil {
			out = append(out, sdk.Header{Key: sdk.String(HeaderSourceOffset), Value: sdk.Uint64(*offset)})
		}
		return sdk.ProducedMessage{ID: id, Headers: out, Payload: payload}
	}
	why := func(i int) (string, error) {
		if i < len(f.each) {
			return f.each[i].stage, f.each[i].cause
		}
		return f.stage, f.cause
	}
	out := make([]sdk.ProducedMessage, 0, f.count())
	for i, m := range f.consumed {
		stage, cause := why(i)
		out = append(out, letter(stage, cause, sdk.MessageID{}, m.Headers, append([]byte(nil), m.Payload...), &m.Offset))
	}
	for i, m := range f.produced {
		stage, cause := why(len(f.consumed) + i)
		// A payload over Iggy's limit (a source's message refused for it) would make its
		// dead letter refused too, and the send is retried until the stop: its first
		// wire.MaxPayloadSize bytes go instead (ferry-error gives the whole size).
		payload := m.Payload[:min(len(m.Payload), wire.MaxPayloadSize)]
		out = append(out, letter(stage, cause, m.ID, m.Headers, payload, nil))
	}
	return out
}

func isFerryHeader(k string) bool {
	switch k {
	case HeaderError, HeaderSourceStream, HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset, HeaderStage, HeaderSource:
		return true
	}
	return false
}

func uint32Field(v uint32) sdk.HeaderField {
	return sdk.HeaderField{Kind: sdk.HeaderUint32, Value: []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}}
}

func cloneField(f sdk.HeaderField) sdk.HeaderField {
	return sdk.HeaderField{Kind: f.Kind, Value: append([]byte(nil), f.Value...)}
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
