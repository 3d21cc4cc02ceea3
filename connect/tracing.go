package connect

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Span names and attribute keys of a sink batch's trace (docs/telemetry.md): one trace
// per polled batch, never one span per message, so a runtime without a tracer pays one
// nil check per batch and nothing per message.
const (
	SpanSinkBatch   = "ferry.sink.batch"
	SpanSinkPoll    = "ferry.sink.poll"
	SpanSinkConsume = "ferry.sink.consume"
	SpanSinkStore   = "ferry.sink.store"
	SpanSourceBatch = "ferry.source.batch"
	SpanSourceSend  = "ferry.source.send"

	AttrConnectorKey  = attribute.Key("ferry.connector.key")
	AttrStream        = attribute.Key("iggy.stream")
	AttrTopic         = attribute.Key("iggy.topic")
	AttrPartition     = attribute.Key("iggy.partition")
	AttrFirstOffset   = attribute.Key("iggy.offset.first")
	AttrLastOffset    = attribute.Key("iggy.offset.last")
	AttrStoredOffset  = attribute.Key("iggy.offset.stored")
	AttrMessageCount  = attribute.Key("messaging.batch.message_count")
	AttrMessaging     = attribute.Key("messaging.system")
	AttrBatchResult   = attribute.Key("ferry.batch.result")
	AttrBatchStored   = attribute.Key("ferry.batch.stored")
	AttrConsumerGroup = attribute.Key("messaging.consumer.group.name")
	AttrAcked         = attribute.Key("ferry.batch.acked")
)

// batchTrace is the trace of one polled batch: its root span starts when the poll began
// and ends once both halves of the batch's life are over, the consume half (delivered,
// or dropped undelivered) and the store half (its last offset stored in Iggy, or never
// stored by this member). The halves end on different goroutines, in either order.
type batchTrace struct {
	ctx     context.Context // carries the root span
	root    trace.Span
	tracer  trace.Tracer
	last    uint64
	pending atomic.Int32 // halves still open
	stored  atomic.Bool
}

// startBatchTrace opens a batch's root span and its poll span, both from when the poll
// request was sent; the poll span ends now.
func (tc *topicConsumer) startBatchTrace(b *consumerBatch) *batchTrace {
	pollStart := b.Sent
	if pollStart.IsZero() {
		pollStart = time.Now()
	}
	first, last := b.Messages[0].Offset, b.Messages[len(b.Messages)-1].Offset
	attrs := []attribute.KeyValue{
		AttrMessaging.String("iggy"),
		AttrConnectorKey.String(tc.s.cfg.Key),
		AttrConsumerGroup.String(tc.group),
		AttrStream.String(tc.topic.Stream),
		AttrTopic.String(tc.topic.Topic),
		AttrPartition.Int64(int64(b.Partition)),
		AttrFirstOffset.Int64(int64(first)),
		AttrLastOffset.Int64(int64(last)),
		AttrMessageCount.Int(len(b.Messages)),
	}
	ctx, root := tc.s.tracer.Start(context.Background(), SpanSinkBatch,
		trace.WithTimestamp(pollStart), trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindConsumer))
	_, poll := tc.s.tracer.Start(ctx, SpanSinkPoll, trace.WithTimestamp(pollStart))
	poll.End()
	bt := &batchTrace{ctx: ctx, root: root, tracer: tc.s.tracer, last: last}
	bt.pending.Store(2)
	return bt
}

// startConsume opens the consume span under the batch's root; ctx gets it, so a sink
// that traces sees its Consume as a child.
func (bt *batchTrace) startConsume(ctx context.Context) (context.Context, trace.Span) {
	_, sp := bt.tracer.Start(bt.ctx, SpanSinkConsume)
	return trace.ContextWithSpan(ctx, sp), sp
}

// endConsume closes the consume span with the batch's result.
func endConsume(sp trace.Span, result batchResult, err error) {
	sp.SetAttributes(AttrBatchResult.String(result.String()))
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

// consumed ends the consume half.
func (bt *batchTrace) consumed() { bt.half() }

// storedAt records the store that covered the batch (from start to end) and ends the
// store half.
func (bt *batchTrace) storedAt(start, end time.Time, offset uint64) {
	_, sp := bt.tracer.Start(bt.ctx, SpanSinkStore, trace.WithTimestamp(start),
		trace.WithAttributes(AttrStoredOffset.Int64(int64(offset))))
	sp.End(trace.WithTimestamp(end))
	bt.stored.Store(true)
	bt.half()
}

// storedWithPoll ends the store half of a batch the server stored when it was polled
// (after_polling).
func (bt *batchTrace) storedWithPoll() {
	bt.stored.Store(true)
	bt.half()
}

// unstored ends the store half of a batch this member will not store (released,
// stopped, or stored by the server with the poll under after_polling).
func (bt *batchTrace) unstored() { bt.half() }

func (bt *batchTrace) half() {
	if bt.pending.Add(-1) == 0 {
		bt.root.SetAttributes(AttrBatchStored.Bool(bt.stored.Load()))
		bt.root.End()
	}
}

// release gives a polled batch back and ends its consume half.
func (b polledBatch) release() {
	if b.trace != nil {
		b.trace.consumed()
	}
	b.Release()
}

// sourceTrace is the span of one batch a source read: from Read's return to the ack, with
// the send to Iggy as its child. A nil *sourceTrace (traces off) does nothing.
type sourceTrace struct {
	ctx  context.Context
	root trace.Span
	t    trace.Tracer
}

func (s *sourceRunner) startSourceTrace(start time.Time, n int) *sourceTrace {
	ctx, root := s.tracer.Start(context.Background(), SpanSourceBatch, trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
			AttrMessaging.String("iggy"),
			AttrConnectorKey.String(s.cfg.Key),
			AttrStream.String(s.stream.Stream),
			AttrTopic.String(s.stream.Topic),
			AttrMessageCount.Int(n),
		))
	return &sourceTrace{ctx: ctx, root: root, t: s.tracer}
}

// startSend opens the send span of n messages (nil when traces are off).
func (st *sourceTrace) startSend(start time.Time, n int) trace.Span {
	if st == nil {
		return nil
	}
	_, sp := st.t.Start(st.ctx, SpanSourceSend, trace.WithTimestamp(start),
		trace.WithAttributes(AttrMessageCount.Int(n)))
	return sp
}

func (st *sourceTrace) endSend(sp trace.Span, err error) {
	if sp == nil {
		return
	}
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

// end closes the batch span: acked says whether the batch was acked as done (false: the
// runtime stopped first, or the batch was refused); stop is the error that stops the
// source, if any.
func (st *sourceTrace) end(acked bool, stop error) {
	if st == nil {
		return
	}
	st.root.SetAttributes(AttrAcked.Bool(acked && stop == nil))
	if stop != nil {
		st.root.RecordError(stop)
		st.root.SetStatus(codes.Error, stop.Error())
	}
	st.root.End()
}
