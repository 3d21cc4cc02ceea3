package connect

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// poisonPayload is message i of the poison tests: JSON objects with spaces (the sink must
// get them compact), except message 5, which is not JSON.
func poisonPayload(i int) []byte {
	if i == 5 {
		return []byte(`{"i": 5`)
	}
	return fmt.Appendf(nil, `{ "i" : %d, "tag" : "<x>" }`, i)
}

func jsonSinkConfig(mode config.CommitMode, policy config.FailurePolicy) *config.Sink {
	cfg := testSinkConfig(mode, policy)
	cfg.Streams[0].Schema = sdk.SchemaJSON
	return cfg
}

// TestPoisonMessagePerMessage: a json stream of ten messages whose offset 5 is not JSON,
// in one batch. dead_letter puts exactly that message in dlq/dead (payload as polled,
// ferry-source-offset 5, ferry-stage decode), skip drops it; either way the nine others
// reach the sink re-encoded as compact JSON and the stored offset is 9, in both modes where
// the runtime stores (sink_controlled: the sink commits 9 itself, the runtime resolves 5).
func TestPoisonMessagePerMessage(t *testing.T) {
	for _, policy := range []config.FailurePolicy{config.FailureDeadLetter, config.FailureSkip} {
		for _, mode := range []config.CommitMode{config.CommitAfterConsuming, config.CommitSinkControlled} {
			t.Run(string(policy)+"/"+string(mode), func(t *testing.T) {
				env := newIggyEnv(t)
				env.Topic("s", "t", 1)
				if policy == config.FailureDeadLetter {
					env.Topic("dlq", "dead", 1) // the runtime creates no topic (ferry run --create-topics does)
				}
				env.Fill("s", "t", 0, 10, poisonPayload, userHeader)
				sink := newRecSink()
				sink.commitEach = mode == config.CommitSinkControlled
				rt := env.start(jsonSinkConfig(mode, policy), sink)
				testkit.WaitFor(t, "stored 9", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == 9 })
				stopRuntime(t, rt)
				env.WantStored("g", "s", "t", 0, 9)
				want := append(seq(0, 4), seq(6, 9)...)
				if got := sink.got(0); !equalOffsets(got, want) {
					t.Fatalf("delivered %v, want %v", got, want)
				}
				sink.mu.Lock()
				p0, p9 := sink.payloads[0][0], sink.payloads[0][8]
				sink.mu.Unlock()
				if p0 != `{"i":0,"tag":"<x>"}` || p9 != `{"i":9,"tag":"<x>"}` {
					t.Fatalf("payloads %q, %q: want compact JSON", p0, p9)
				}
				st := rt.Status()[0].Stats
				if st.Decoded != 9 || st.DecodeErrors != 1 || st.TransformErrors != 0 || st.Delivered != 9 || st.FailedBatches != 0 {
					t.Fatalf("stats %+v", st)
				}
				if policy == config.FailureSkip {
					if st.Skipped != 1 || st.DeadLettered != 0 {
						t.Fatalf("stats %+v", st)
					}
					env.wantNoStream("dlq")
					return
				}
				if st.DeadLettered != 1 || st.Skipped != 0 {
					t.Fatalf("stats %+v", st)
				}
				env.wantPoisonDeadLetter(t, 5, `{"i": 5`, "decode")
			})
		}
	}
}

// TestPoisonMessageStop: under on_failure = stop the messages before the poisoned one are
// delivered and stored (4), the sink stops in error naming offset 5, and nothing past it
// is delivered or stored; a restart resumes at 5 and stops again.
func TestPoisonMessageStop(t *testing.T) {
	for _, mode := range []config.CommitMode{config.CommitAfterConsuming, config.CommitSinkControlled} {
		t.Run(string(mode), func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			env.Fill("s", "t", 0, 10, poisonPayload)
			sink := newRecSink()
			sink.commitEach = mode == config.CommitSinkControlled
			cfg := jsonSinkConfig(mode, config.FailureStop)
			cfg.Restart.MaxRestarts = 0
			rt := env.start(cfg, sink)
			testkit.WaitFor(t, "error status", func() bool { return rt.Status()[0].State == StateError })
			stopRuntime(t, rt)
			env.WantStored("g", "s", "t", 0, 4)
			if got := sink.got(0); !equalOffsets(got, seq(0, 4)) {
				t.Fatalf("delivered %v, want 0..4", got)
			}
			st := rt.Status()[0]
			if st.LastError == nil || !strings.Contains(st.LastError.Message, "offset 5: decode: json:") {
				t.Fatalf("last error %+v", st.LastError)
			}
			if st.Stats.DecodeErrors != 1 || st.Stats.Delivered != 5 || st.Stats.Skipped != 0 || st.Stats.DeadLettered != 0 {
				t.Fatalf("stats %+v", st.Stats)
			}
		})
	}
}

// wantPoisonDeadLetter fails unless dlq/dead holds exactly one message: the payload as
// polled, the user header, the source headers with offset, ferry-stage and ferry-error.
func (e *iggyEnv) wantPoisonDeadLetter(t *testing.T, offset uint64, payload, stage string) {
	t.Helper()
	zero := uint32(0)
	res, err := e.Admin.PollMessages(bg(t), iggy.PollRequest{
		Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)},
		Stream:   iggy.Name("dlq"), Topic: iggy.Name("dead"), Partition: &zero,
		Strategy: wire.PollOffset(0), Count: 100,
	})
	if err != nil {
		t.Fatalf("poll dead letters: %v", err)
	}
	defer res.Release()
	if len(res.Messages) != 1 {
		t.Fatalf("dead-letter topic holds %d messages, want 1", len(res.Messages))
	}
	m := res.Messages[0]
	if string(m.Payload) != payload {
		t.Fatalf("dead letter payload %q, want %q", m.Payload, payload)
	}
	kvs, err := m.Headers(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]wire.HeaderValue{
		"trace":               wire.StringValue("abc"),
		HeaderSourceStream:    wire.StringValue("s"),
		HeaderSourceTopic:     wire.StringValue("t"),
		HeaderSourcePartition: wire.Uint32Value(0),
		HeaderSourceOffset:    wire.Uint64Value(offset),
		HeaderStage:           wire.StringValue(stage),
	}
	if len(kvs) != len(want)+1 {
		t.Fatalf("dead letter has %d headers, want %d: %v", len(kvs), len(want)+1, kvs)
	}
	for k, w := range want {
		v, ok := wire.LookupKV(kvs, k)
		if !ok || v.Kind != w.Kind || string(v.Raw) != string(w.Raw) {
			t.Fatalf("dead letter header %s = %+v (found %t), want %+v", k, v, ok, w)
		}
	}
	v, ok := wire.LookupKV(kvs, HeaderError)
	if wantErr := fmt.Sprintf("offset %d: %s: json:", offset, stage); !ok || !strings.HasPrefix(string(v.Raw), wantErr) {
		t.Fatalf("ferry-error %q, want prefix %q", v.Raw, wantErr)
	}
}

// TestAvroStreamRefusedAtSetup: a sink whose avro stream has an invalid Avro schema fails at
// setup, naming the stream, and is not restarted (no restart can fix it).
func TestAvroStreamRefusedAtSetup(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 3, nil)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Streams[0].Schema, cfg.Streams[0].AvroSchemaJSON = sdk.SchemaAvro, `{"type":"recrd"}`
	sink := newRecSink()
	rt := env.start(cfg, sink)
	testkit.WaitFor(t, "gave up", func() bool { st := rt.Status()[0]; return st.State == StateError && st.Restart.GaveUp })
	stopRuntime(t, rt)
	st := rt.Status()[0]
	if st.LastError == nil || !strings.Contains(st.LastError.Message, "stream s: avro schema:") || st.Restart.Total != 0 {
		t.Fatalf("status %+v, last error %+v", st, st.LastError)
	}
	if got := sink.got(0); len(got) != 0 {
		t.Fatalf("delivered %v", got)
	}
}

// TestAvroStreamDecoded: an avro stream with avro_schema_json: each datum reaches the sink
// as JSON (fields in schema order); a datum with a trailing byte is poison (skip).
func TestAvroStreamDecoded(t *testing.T) {
	const avroSchema = `{"type":"record","name":"R","fields":[{"name":"n","type":"long"},{"name":"s","type":"string"}]}`
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 3, func(i int) []byte {
		b := []byte{byte(2 * i), 4, 'o', 'k'} // zig-zag: long i, string of length 2
		if i == 1 {
			b = append(b, 0)
		}
		return b
	})
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureSkip)
	cfg.Streams[0].Schema, cfg.Streams[0].AvroSchemaJSON = sdk.SchemaAvro, avroSchema
	sink := newRecSink()
	rt := env.start(cfg, sink)
	testkit.WaitFor(t, "stored 2", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == 2 })
	stopRuntime(t, rt)
	sink.mu.Lock()
	got := append([]string(nil), sink.payloads[0]...)
	sink.mu.Unlock()
	if fmt.Sprint(got) != fmt.Sprint([]string{`{"n":0,"s":"ok"}`, `{"n":2,"s":"ok"}`}) {
		t.Fatalf("sink got %q", got)
	}
	if st := rt.Status()[0].Stats; st.Skipped != 1 || st.DecodeErrors != 1 || st.Decoded != 2 {
		t.Fatalf("stats %+v", st)
	}
}
