package connect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// jsonBatchSource produces three batches of five raw payloads; in batch 1, messages 6 and
// 8 are not JSON.
// It records every ack.
type jsonBatchSource struct {
	seqSource
}

func (s *jsonBatchSource) Read(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	b, ack, err := s.seqSource.Read(ctx)
	if err != nil {
		return b, ack, err
	}
	for i := range b.Messages {
		var n int
		_, _ = fmt.Sscanf(string(b.Messages[i].Payload), "m%d", &n)
		if n == 6 || n == 8 {
			b.Messages[i].Payload = fmt.Appendf(nil, "not json %d", n)
		} else {
			b.Messages[i].Payload = fmt.Appendf(nil, `{"n":%d}`, n)
		}
	}
	return b, ack, nil
}

// payloads reads partition 0 of stream/topic from the start.
func (e *iggyEnv) payloads(stream, topic string) []wire.Message {
	e.T.Helper()
	zero := uint32(0)
	res, err := e.Admin.PollMessages(bg(e.T), iggy.PollRequest{
		Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)},
		Stream:   iggy.Name(stream), Topic: iggy.Name(topic), Partition: &zero,
		Strategy: wire.PollOffset(0), Count: 1000,
	})
	if err != nil {
		e.T.Fatalf("poll %s/%s: %v", stream, topic, err)
	}
	return res.Messages
}

func startSource(t *testing.T, env *iggyEnv, cfg *config.Source, src sdk.Source) *Runtime {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := sdk.NewRegistry().AddSource("seq", func() sdk.Source { return src })
	rt, err := New(Options{Connectors: &config.Connectors{Sources: []*config.Source{cfg}}, Client: env.Dial(), Builtins: reg,
		Runtime: &config.Runtime{State: config.State{Path: t.TempDir()}}, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestSourceRejectedBatchPolicies: two messages of a batch that are not JSON, for a json
// stream, are handled by the source's on_failure one by one, and only they: skip drops
// them, dead_letter sends them with their error, and the rest of their batch is sent;
// stop rejects their batch and stops the source with nothing after it sent. The counters
// say exactly that.
func TestSourceRejectedBatchPolicies(t *testing.T) {
	for _, c := range []struct {
		policy config.FailurePolicy
		n      uint32
	}{{config.FailureSkip, 1}, {config.FailureDeadLetter, 1}, {config.FailureStop, 1},
		{config.FailureSkip, 4}, {config.FailureDeadLetter, 4}, {config.FailureStop, 4}} {
		policy := c.policy
		t.Run(fmt.Sprintf("%s/max_in_flight=%d", policy, c.n), func(t *testing.T) {
			fastSourceBackoff(t)
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			if policy == config.FailureDeadLetter {
				env.Topic("dlq", "dead", 1) // the runtime creates no topic (ferry run --create-topics does)
			}
			src := &jsonBatchSource{seqSource{t: t, batchSize: 5, total: 15, schema: sdk.SchemaRaw, maxUnacked: 4}}
			cfg := sourceCfg("js", config.SourceStream{Stream: "s", Topic: "t", Schema: sdk.SchemaJSON, BatchLength: 100})
			cfg.OnFailure, cfg.PluginConfig, cfg.MaxInFlight = policy, []byte("null"), c.n
			cfg.DeadLetter = config.DeadLetter{Stream: "dlq", Topic: "dead"}
			cfg.Retry = config.Retry{MaxRetries: 1, InitialBackoff: 1, MaxBackoff: 1}
			rt := startSource(t, env, cfg, src)
			defer stopRuntime(t, rt)
			want := StateStopped
			if policy == config.FailureStop {
				want = StateError
			}
			testkit.WaitFor(t, "source ended", func() bool {
				st, _ := rt.Connector(KindSource, "js")
				return st.State == want && st.Restart.GaveUp == (want == StateError)
			})
			st, _ := rt.Connector(KindSource, "js")
			got := env.payloads("s", "t")
			var sent []string
			for _, m := range got {
				sent = append(sent, string(m.Payload))
			}
			acks, _, _ := src.snapshot()
			switch policy {
			case config.FailureStop:
				if strings.Join(sent, ",") != `{"n":0},{"n":1},{"n":2},{"n":3},{"n":4}` {
					t.Fatalf("sent %v", sent)
				}
				// With max_in_flight 4 the third batch may have been read before the second
				// was rejected: then it is nacked unsent (nothing after the gap).
				read := int(st.Stats.Produced / 5)
				if len(acks) != read || read < 2 || read > 2+int(c.n-1) || acks[0] != nil || acks[1] == nil || !strings.Contains(acks[1].Error(), "batch rejected (encode)") {
					t.Fatalf("%d batches read, acks %v", read, acks)
				}
				if read == 3 && !errors.Is(acks[2], errEarlierUndelivered) {
					t.Fatalf("ack of the batch after the rejected one = %v, want errEarlierUndelivered", acks[2])
				}
				if st.LastError == nil || !strings.Contains(st.LastError.Message, "not valid JSON") {
					t.Fatalf("last error %+v", st.LastError)
				}
				if st.Stats.Sent != 5 || st.Stats.Committed != 5 || st.Stats.FailedBatches != 1 || st.Stats.Skipped != 0 {
					t.Fatalf("stats %+v", st.Stats)
				}
				return
			case config.FailureDeadLetter:
				dead := env.payloads("dlq", "dead")
				if len(dead) != 2 {
					t.Fatalf("%d dead letters, want 2", len(dead))
				}
				for i, m := range dead {
					if want := fmt.Sprintf("not json %d", 6+2*i); string(m.Payload) != want {
						t.Fatalf("dead letter %d = %q, want %q", i, m.Payload, want)
					}
					kvs, err := m.Headers(nil)
					if err != nil {
						t.Fatal(err)
					}
					hs := map[string]string{}
					for _, kv := range kvs {
						hs[string(kv.Key.Raw)] = string(kv.Value.Raw)
					}
					if hs[HeaderStage] != "encode" || hs[HeaderSource] != "js" || !strings.Contains(hs[HeaderError], "not valid JSON") {
						t.Fatalf("dead letter %d headers %v", i, hs)
					}
				}
				if st.Stats.DeadLettered != 2 || st.Stats.Skipped != 0 {
					t.Fatalf("stats %+v", st.Stats)
				}
			case config.FailureSkip:
				if st.Stats.Skipped != 2 || st.Stats.DeadLettered != 0 {
					t.Fatalf("stats %+v", st.Stats)
				}
			}
			if strings.Join(sent, ",") != `{"n":0},{"n":1},{"n":2},{"n":3},{"n":4},{"n":5},{"n":7},{"n":9},{"n":10},{"n":11},{"n":12},{"n":13},{"n":14}` {
				t.Fatalf("sent %v", sent)
			}
			if len(acks) != 3 || acks[0] != nil || acks[1] != nil || acks[2] != nil {
				t.Fatalf("acks %v, want three nil (the rejected messages are handled, not retried)", acks)
			}
			if st.Stats.Produced != 15 || st.Stats.Sent != 13 || st.Stats.Committed != 15 || st.Stats.FailedBatches != 0 || st.Stats.DecodeErrors != 2 {
				t.Fatalf("stats %+v", st.Stats)
			}
		})
	}
}

// TestSourceTransforms: a source's JSON payloads go through its transforms in file order
// (add_fields, update_fields with conditions, delete_fields) before they are sent to its
// json stream, re-encoded as compact JSON.
func TestSourceTransforms(t *testing.T) {
	fastSourceBackoff(t)
	env := newIggyEnv(t)
	env.Topic("s", "t", 1) // the runtime creates no topic (ferry run --create-topics does)
	src := &jsonBatchSource{seqSource{t: t, batchSize: 5, total: 3, schema: sdk.SchemaJSON}}
	cfg := sourceCfg("js", config.SourceStream{Stream: "s", Topic: "t", Schema: sdk.SchemaJSON, BatchLength: 100})
	cfg.OnFailure, cfg.PluginConfig = config.FailureStop, []byte("null")
	cfg.Retry = config.Retry{MaxRetries: 1, InitialBackoff: 1, MaxBackoff: 1}
	static := func(v any) map[string]any { return map[string]any{"static": v} }
	cfg.Transforms = []config.Transform{
		{Type: "add_fields", Enabled: true, Config: map[string]any{"enabled": true, "fields": []any{
			map[string]any{"key": "src", "value": static("gen")},
			map[string]any{"key": "seen", "value": static(true)}}}},
		{Type: "update_fields", Enabled: true, Config: map[string]any{"enabled": true, "fields": []any{
			map[string]any{"key": "m", "value": static(int64(1)), "condition": "key_not_exists"},
			map[string]any{"key": "seen", "value": static(false), "condition": "key_exists"}}}},
		{Type: "delete_fields", Enabled: true, Config: map[string]any{"enabled": true, "fields": []any{"src"}}},
	}
	rt := startSource(t, env, cfg, src)
	defer stopRuntime(t, rt)
	testkit.WaitFor(t, "source ended", func() bool { st, _ := rt.Connector(KindSource, "js"); return st.State == StateStopped })
	var sent []string
	for _, m := range env.payloads("s", "t") {
		sent = append(sent, string(m.Payload))
	}
	if got := strings.Join(sent, ","); got != `{"n":0,"seen":false,"m":1},{"n":1,"seen":false,"m":1},{"n":2,"seen":false,"m":1}` {
		t.Fatalf("sent %s", got)
	}
}
