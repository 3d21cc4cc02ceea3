package connect

import (
	"context"
	"slices"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// tracedRuntime starts cfg's sink with a tracer that records every ended span.
func (e *iggyEnv) tracedRuntime(cfg *config.Sink, sink sdk.Sink) (*Runtime, *tracetest.InMemoryExporter) {
	e.T.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	e.T.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	fitInFlight(cfg, sink)
	if err := cfg.Validate(); err != nil {
		e.T.Fatal(err)
	}
	reg := sdk.NewRegistry().AddSink("rec", func() sdk.Sink { return sink })
	rt, err := New(Options{Connectors: &config.Connectors{Sinks: []*config.Sink{cfg}}, Client: e.Dial(), Builtins: reg,
		Logger: quietLog, Tracer: tp.Tracer("test")})
	if err != nil {
		e.T.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	return rt, exp
}

// batchSpans groups the ended spans by trace: the root (SpanSinkBatch) and its children
// by name, roots ordered by first offset.
type tracedBatch struct {
	root     tracetest.SpanStub
	children map[string]tracetest.SpanStub
}

func batchSpans(t *testing.T, spans tracetest.SpanStubs) []tracedBatch {
	t.Helper()
	byTrace := map[string]*tracedBatch{}
	var order []string
	for _, s := range spans {
		id := s.SpanContext.TraceID().String()
		b := byTrace[id]
		if b == nil {
			b = &tracedBatch{children: map[string]tracetest.SpanStub{}}
			byTrace[id] = b
			order = append(order, id)
		}
		if s.Name == SpanSinkBatch {
			b.root = s
			continue
		}
		if _, dup := b.children[s.Name]; dup {
			t.Fatalf("trace %s has two %s spans", id, s.Name)
		}
		if s.Parent.SpanID() != b.root.SpanContext.SpanID() && b.root.Name != "" {
			t.Fatalf("%s's parent is %s, not the batch span", s.Name, s.Parent.SpanID())
		}
		b.children[s.Name] = s
	}
	out := make([]tracedBatch, 0, len(order))
	for _, id := range order {
		b := byTrace[id]
		if b.root.Name == "" {
			t.Fatalf("trace %s has no ended %s span (children %v)", id, SpanSinkBatch, b.children)
		}
		for name, c := range b.children {
			if c.Parent.SpanID() != b.root.SpanContext.SpanID() {
				t.Fatalf("%s's parent is %s, not the batch span %s", name, c.Parent.SpanID(), b.root.SpanContext.SpanID())
			}
		}
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b tracedBatch) int {
		return int(attr(a.root, AttrFirstOffset).AsInt64() - attr(b.root, AttrFirstOffset).AsInt64())
	})
	return out
}

func attr(s tracetest.SpanStub, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func childNames(b tracedBatch) []string {
	var names []string
	for n := range b.children {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// TestBatchTraces: three batches of ten (all polled from a full partition) give three
// traces, each with its offsets, a poll and a consume span, and a store span (under
// after_polling the server stores with the poll, so none) whose stored offset covers
// the batch; every batch span says stored.
func TestBatchTraces(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			env.Fill("s", "t", 0, 30, nil)
			sink := newRecSink()
			sink.commitEach = mode == config.CommitSinkControlled
			rt, exp := env.tracedRuntime(testSinkConfig(mode, config.FailureStop), sink)
			var batches []tracedBatch
			testkit.WaitFor(t, "three ended batch traces", func() bool {
				n := 0
				for _, s := range exp.GetSpans() {
					if s.Name == SpanSinkBatch {
						n++
					}
				}
				return n == 3
			})
			stopRuntime(t, rt)
			env.WantStored("g", "s", "t", 0, 29)
			batches = batchSpans(t, exp.GetSpans())
			if len(batches) != 3 {
				t.Fatalf("%d traces, want 3", len(batches))
			}
			wantChildren := []string{SpanSinkConsume, SpanSinkPoll, SpanSinkStore}
			if mode == config.CommitAfterPolling {
				wantChildren = []string{SpanSinkConsume, SpanSinkPoll}
			}
			for i, b := range batches {
				first, last := int64(10*i), int64(10*i+9)
				want := map[attribute.Key]attribute.Value{
					AttrConnectorKey: attribute.StringValue("rec"), AttrConsumerGroup: attribute.StringValue("g"),
					AttrStream: attribute.StringValue("s"), AttrTopic: attribute.StringValue("t"),
					AttrPartition: attribute.Int64Value(0), AttrFirstOffset: attribute.Int64Value(first),
					AttrLastOffset: attribute.Int64Value(last), AttrMessageCount: attribute.IntValue(10),
					AttrMessaging: attribute.StringValue("iggy"), AttrBatchStored: attribute.BoolValue(true),
				}
				for k, v := range want {
					if got := attr(b.root, k); got != v {
						t.Fatalf("batch %d: %s = %v, want %v", i, k, got.String(), v.String())
					}
				}
				if got := childNames(b); !slices.Equal(got, wantChildren) {
					t.Fatalf("batch %d: children %v, want %v", i, got, wantChildren)
				}
				if got := attr(b.children[SpanSinkConsume], AttrBatchResult).AsString(); got != "delivered" {
					t.Fatalf("batch %d: result %q, want delivered", i, got)
				}
				if st, ok := b.children[SpanSinkStore]; ok {
					if got := attr(st, AttrStoredOffset).AsInt64(); got < last || got > 29 {
						t.Fatalf("batch %d: stored offset %d, want one in [%d, 29]", i, got, last)
					}
				}
				for name, c := range b.children {
					if c.StartTime.Before(b.root.StartTime) || c.EndTime.After(b.root.EndTime) {
						t.Fatalf("batch %d: %s [%v, %v] outside the batch [%v, %v]", i, name, c.StartTime, c.EndTime, b.root.StartTime, b.root.EndTime)
					}
				}
			}
		})
	}
}

// TestBatchTraceNeverStored: under on_failure = stop, the failing batch's consume span
// has the error and the result "stop", and no batch from it on says stored, while the
// batch before it does.
func TestBatchTraceNeverStored(t *testing.T) {
	for _, mode := range []config.CommitMode{config.CommitAfterConsuming, config.CommitSinkControlled} {
		t.Run(string(mode), func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			env.Fill("s", "t", 0, 30, nil)
			sink := newRecSink()
			sink.commitEach = mode == config.CommitSinkControlled
			sink.failBatch, sink.failTimes = 1, -1
			cfg := testSinkConfig(mode, config.FailureStop)
			cfg.MaxInFlight = 1 // the batch after the failing one is never delivered
			rt, exp := env.tracedRuntime(cfg, sink)
			testkit.WaitFor(t, "the sink stopped", func() bool { return rt.Status()[0].State == StateError })
			stopRuntime(t, rt)
			env.WantStored("g", "s", "t", 0, 9)
			batches := batchSpans(t, exp.GetSpans())
			if len(batches) < 2 {
				t.Fatalf("%d traces, want at least 2", len(batches))
			}
			for i, b := range batches {
				stored := attr(b.root, AttrBatchStored).AsBool()
				if stored != (i == 0) {
					t.Fatalf("batch %d (offsets %d..): stored = %t", i, attr(b.root, AttrFirstOffset).AsInt64(), stored)
				}
			}
			failed := batches[1].children[SpanSinkConsume]
			if got := attr(failed, AttrBatchResult).AsString(); got != "stop" || failed.Status.Code != codes.Error {
				t.Fatalf("failing batch: result %q status %v, want stop and an error", got, failed.Status)
			}
			if _, ok := batches[1].children[SpanSinkStore]; ok {
				t.Fatal("failing batch has a store span")
			}
		})
	}
}

// TestSourceBatchTraces: ten batches of 25 give ten source batch spans, each with its
// key, stream, topic and size, acked, with one send span under it (the first sends fail
// and are retried inside it, so it ends without an error).
func TestSourceBatchTraces(t *testing.T) {
	fastSourceBackoff(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	src := &seqSource{t: t, batchSize: 25, total: 250, schema: sdk.SchemaText}
	be := &memSource{failNext: 3}
	reg := sdk.NewRegistry().AddSource("seq", func() sdk.Source { return src })
	rt := newRuntime(Options{Connectors: &config.Connectors{Sources: []*config.Source{sourceCfg("seq")}}, Builtins: reg,
		Logger: quietLog, Tracer: tp.Tracer("test")}, be, t.TempDir())
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "source stopped at end of input", func() bool { return rt.Status()[0].State == StateStopped })
	if err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	var roots, sends []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		switch s.Name {
		case SpanSourceBatch:
			roots = append(roots, s)
		case SpanSourceSend:
			sends = append(sends, s)
		default:
			t.Fatalf("unexpected span %s", s.Name)
		}
	}
	if len(roots) != 10 || len(sends) != 10 {
		t.Fatalf("%d batch spans and %d send spans, want 10 and 10", len(roots), len(sends))
	}
	parents := map[string]bool{}
	for _, r := range roots {
		want := map[attribute.Key]attribute.Value{
			AttrConnectorKey: attribute.StringValue("seq"), AttrStream: attribute.StringValue("s"),
			AttrTopic: attribute.StringValue("t"), AttrMessageCount: attribute.IntValue(25),
			AttrMessaging: attribute.StringValue("iggy"), AttrAcked: attribute.BoolValue(true),
		}
		for k, v := range want {
			if got := attr(r, k); got != v {
				t.Fatalf("source batch: %s = %v, want %v", k, got.String(), v.String())
			}
		}
		if r.SpanKind.String() != "producer" || r.Status.Code != codes.Unset {
			t.Fatalf("source batch: kind %s status %v", r.SpanKind, r.Status)
		}
		parents[r.SpanContext.SpanID().String()] = true
	}
	for _, s := range sends {
		if !parents[s.Parent.SpanID().String()] || s.Status.Code != codes.Unset || attr(s, AttrMessageCount).AsInt64() != 25 {
			t.Fatalf("send span: parent %s status %v count %v", s.Parent.SpanID(), s.Status, attr(s, AttrMessageCount).String())
		}
		delete(parents, s.Parent.SpanID().String())
	}
}
