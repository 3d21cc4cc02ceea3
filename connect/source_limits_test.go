package connect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// payloadsFrom reads partition 0 of stream/topic from offset from, in one poll.
func (e *iggyEnv) payloadsFrom(stream, topic string, from uint64) []wire.Message {
	e.T.Helper()
	zero := uint32(0)
	res, err := e.Admin.PollMessages(bg(e.T), iggy.PollRequest{
		Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)},
		Stream:   iggy.Name(stream), Topic: iggy.Name(topic), Partition: &zero,
		Strategy: wire.PollOffset(from), Count: 1000,
	})
	if err != nil {
		e.T.Fatalf("poll %s/%s from %d: %v", stream, topic, from, err)
	}
	return res.Messages
}

// describedSource is a seqSource that names its messages (sdk.MessageDescriber).
type describedSource struct{ seqSource }

func (s *describedSource) DescribeMessage(m *sdk.ProducedMessage) string {
	return fmt.Sprintf("seq message of %d bytes", len(m.Payload))
}

// TestSourceUnsendableMessageAlone: three messages of a batch that Iggy can never accept
// (m6: a payload one byte over its 64,000,000-byte limit; m7: an empty payload; m8: 400
// headers, 107,600 bytes, over its 100,000) are handled by on_failure one by one, and the
// rest of their batch is sent, as a message that fails encode: skip drops the three;
// dead_letter sends m6 with its payload cut to the limit and m8 without its headers (a
// dead letter like them would be refused too) and skips m7 (no message can be empty);
// stop rejects their batch and stops the source. Before, the client refused the whole
// send, the runtime retried it, and on_failure then took every message of the batch
// (under skip: 5 messages lost for 3). Each error names the message as the source
// describes it.
func TestSourceUnsendableMessageAlone(t *testing.T) {
	for _, c := range []struct {
		policy config.FailurePolicy
		n      uint32
	}{{config.FailureSkip, 1}, {config.FailureDeadLetter, 1}, {config.FailureStop, 1},
		{config.FailureSkip, 4}, {config.FailureDeadLetter, 4}, {config.FailureStop, 4}} {
		t.Run(fmt.Sprintf("%s/max_in_flight=%d", c.policy, c.n), func(t *testing.T) {
			fastSourceBackoff(t)
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			env.Topic("dlq", "dead", 1)
			big := []byte(strings.Repeat("x", 64_000_001))
			hs := make([]sdk.Header, 400)
			for i := range hs {
				hs[i] = sdk.Header{Key: sdk.String(fmt.Sprintf("h%03d", i)), Value: sdk.String(strings.Repeat("v", 255))}
			}
			src := &describedSource{seqSource{t: t, batchSize: 5, total: 15, schema: sdk.SchemaRaw, maxUnacked: 4,
				onBatch: func(batches int, msgs []sdk.ProducedMessage) {
					if batches == 2 {
						msgs[1].Payload, msgs[2].Payload, msgs[3].Headers = big, []byte{}, hs
					}
				}}}
			cfg := sourceCfg("lim", config.SourceStream{Stream: "s", Topic: "t", Schema: sdk.SchemaRaw, BatchLength: 100})
			cfg.OnFailure, cfg.PluginConfig, cfg.MaxInFlight = c.policy, []byte("null"), c.n
			cfg.DeadLetter = config.DeadLetter{Stream: "dlq", Topic: "dead"}
			cfg.Retry = config.Retry{MaxRetries: 1, InitialBackoff: 1, MaxBackoff: 1}
			rt := startSource(t, env, cfg, src)
			defer stopRuntime(t, rt)
			want := StateStopped
			if c.policy == config.FailureStop {
				want = StateError
			}
			testkit.WaitFor(t, "source ended", func() bool {
				st, _ := rt.Connector(KindSource, "lim")
				return st.State == want && st.Restart.GaveUp == (want == StateError)
			})
			st, _ := rt.Connector(KindSource, "lim")
			var sent []string
			for _, m := range env.payloads("s", "t") {
				sent = append(sent, string(m.Payload))
			}
			acks, _, _ := src.snapshot()
			if c.policy == config.FailureStop {
				if strings.Join(sent, ",") != "m0,m1,m2,m3,m4" {
					t.Fatalf("sent %v", sent)
				}
				if st.LastError == nil || !strings.Contains(st.LastError.Message, "seq message of 64000001 bytes: payload of 64000001 bytes, over Iggy's limit of 64000000 bytes per message") {
					t.Fatalf("last error %+v", st.LastError)
				}
				if len(acks) < 2 || acks[0] != nil || acks[1] == nil || st.Stats.Sent != 5 || st.Stats.FailedBatches != 1 || st.Stats.Skipped != 0 {
					t.Fatalf("acks %v, stats %+v", acks, st.Stats)
				}
				return
			}
			if strings.Join(sent, ",") != "m0,m1,m2,m3,m4,m5,m9,m10,m11,m12,m13,m14" {
				t.Fatalf("sent %v", sent)
			}
			if len(acks) != 3 || acks[0] != nil || acks[1] != nil || acks[2] != nil {
				t.Fatalf("acks %v, want three nil", acks)
			}
			skipped, dead := uint64(3), uint64(0)
			if c.policy == config.FailureDeadLetter {
				skipped, dead = 1, 2
				// One poll answers at most one such letter: read each at its offset.
				letters := env.payloads("dlq", "dead")
				if len(letters) != 1 {
					t.Fatalf("%d dead letters at offset 0, want the 64 MB one", len(letters))
				}
				letters = append(letters, env.payloadsFrom("dlq", "dead", 1)...)
				if len(letters) != 2 {
					t.Fatalf("%d dead letters, want 2", len(letters))
				}
				for i, wantPayload := range []string{string(big[:64_000_000]), "m8"} {
					m := letters[i]
					kvs, err := m.Headers(nil)
					if err != nil {
						t.Fatal(err)
					}
					got := map[string]string{}
					for _, kv := range kvs {
						got[string(kv.Key.Raw)] = string(kv.Value.Raw)
					}
					wantErr := []string{"seq message of 64000001 bytes: payload of 64000001 bytes", "seq message of 2 bytes: 400 headers of 107600 bytes"}[i]
					if string(m.Payload) != wantPayload || len(kvs) != 3 || got[HeaderStage] != "send" || got[HeaderSource] != "lim" || !strings.Contains(got[HeaderError], wantErr) {
						t.Fatalf("dead letter %d: %d payload bytes, headers %v; want %d bytes, ferry-stage send, ferry-source lim, ferry-error with %q",
							i, len(m.Payload), got, len(wantPayload), wantErr)
					}
				}
			}
			if st.Stats.Skipped != skipped || st.Stats.DeadLettered != dead || st.Stats.Sent != 12 || st.Stats.SendErrors != 3 ||
				st.Stats.FailedBatches != 0 || st.Stats.Committed != 15 || st.Stats.Retries != 0 {
				t.Fatalf("stats %+v; want skipped %d, dead-lettered %d, 12 sent, 3 send errors, no failed batch, 15 acked, no retry", st.Stats, skipped, dead)
			}
		})
	}
}

// hiccupSource fails its first Read, then, once the test lets it, returns one batch of one
// message; later Reads wait for the stop.
type hiccupSource struct {
	release chan struct{}
	mu      sync.Mutex
	reads   int
}

func (s *hiccupSource) Open(context.Context, sdk.SourceEnv) error { return nil }
func (s *hiccupSource) Close(context.Context) error               { return nil }

func (s *hiccupSource) Read(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	s.mu.Lock()
	s.reads++
	n := s.reads
	s.mu.Unlock()
	switch n {
	case 1:
		return sdk.SourceBatch{}, nil, errors.New("source hiccup")
	case 2:
		select {
		case <-s.release:
			return sdk.SourceBatch{Messages: []sdk.ProducedMessage{{Payload: []byte("after the hiccup")}}}, sdk.NoAck, nil
		case <-ctx.Done():
			return sdk.SourceBatch{}, nil, ctx.Err()
		}
	}
	<-ctx.Done()
	return sdk.SourceBatch{}, nil, ctx.Err()
}

// TestSourceStatusFollowsDelivery: a source whose Read failed is in error, with the read's
// error, while it retries; once a batch of it is delivered it is running again, with no last
// error. Before, nothing but a retried send that then succeeded set it running again: a
// source that had one failed read, or a batch rejected and skipped, stayed in error while
// it delivered.
func TestSourceStatusFollowsDelivery(t *testing.T) {
	fastSourceBackoff(t)
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	src := &hiccupSource{release: make(chan struct{})}
	cfg := sourceCfg("hic", config.SourceStream{Stream: "s", Topic: "t", Schema: sdk.SchemaRaw, BatchLength: 100})
	cfg.PluginConfig, cfg.OnFailure = []byte("null"), config.FailureStop
	cfg.Retry = config.Retry{MaxRetries: 1, InitialBackoff: 1, MaxBackoff: 1}
	rt := startSource(t, env, cfg, src)
	defer stopRuntime(t, rt)
	testkit.WaitFor(t, "the source in error after its failed read", func() bool {
		st, _ := rt.Connector(KindSource, "hic")
		return st.State == StateError && st.LastError != nil && strings.Contains(st.LastError.Message, "read: source hiccup")
	})
	close(src.release)
	testkit.WaitFor(t, "the batch sent", func() bool { st, _ := rt.Connector(KindSource, "hic"); return st.Stats.Committed == 1 })
	testkit.WaitFor(t, "the source running", func() bool {
		st, _ := rt.Connector(KindSource, "hic")
		return st.State == StateRunning && st.LastError == nil
	})
	if got := env.payloads("s", "t"); len(got) != 1 || string(got[0].Payload) != "after the hiccup" {
		t.Fatalf("topic holds %d messages, want the one batch", len(got))
	}
}
