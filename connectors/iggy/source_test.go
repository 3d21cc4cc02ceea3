package iggy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	iggyclient "github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
	"github.com/ferryio/ferry/server/servertest"
)

// remote is the remote Iggy server of a test: an embedded server on loopback TCP, its
// topic filled with messages that carry headers, an id and an origin timestamp of their own.
type remote struct {
	*iggykit.Env
	stream, topic string
}

func startRemote(t *testing.T, partitions uint32) *remote {
	t.Helper()
	r := &remote{Env: iggykit.Start(t), stream: "origin", topic: "events"}
	r.Topic(r.stream, r.topic, partitions)
	return r
}

// fill appends n messages to each partition: message i of partition p has id p<<32|i+1
// (never zero), origin timestamp 1e15 + i, headers "n" = i and a stale origin header of an
// earlier hop (which the replica must replace), payload "p<p>-m<i>".
func (r *remote) fill(t *testing.T, partitions uint32, from, n int) {
	t.Helper()
	for p := range partitions {
		var msgs []iggyclient.Message
		for i := from; i < from+n; i++ {
			var id [16]byte
			binary.LittleEndian.PutUint64(id[:8], uint64(p)<<32|uint64(i+1))
			msgs = append(msgs, iggyclient.Message{ID: id, OriginTimestamp: 1e15 + uint64(i), Payload: fmt.Appendf(nil, "p%d-m%d", p, i),
				Headers: []wire.KV{
					{Key: wire.StringValue("n"), Value: wire.Uint64Value(uint64(i))},
					{Key: wire.StringValue(HeaderOffset), Value: wire.StringValue("stale")},
				}})
		}
		if _, err := r.Admin.SendMessages(r.Ctx(), iggyclient.Name(r.stream), iggyclient.Name(r.topic), wire.ToPartition(p), msgs); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *remote) config(extra map[string]any) map[string]any {
	c := map[string]any{"address": r.Addr, "username": servertest.Username, "password": servertest.Password,
		"stream": r.stream, "topic": r.topic, "batch_size": 7}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

func (r *remote) deleteGroup(ctx context.Context, group string) error {
	err := r.Admin.DeleteConsumerGroup(ctx, iggyclient.Name(r.stream), iggyclient.Name(r.topic), iggyclient.Name(group))
	if err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

func isNotFound(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "NotFound"))
}

// crashing returns New for a harness: each new instance first kills the connections of the
// one before it, as a process that died would lose them (the remote then drops its
// membership), without leaving the group or storing anything.
func crashing() func() sdk.Source {
	var mu sync.Mutex
	var prev *Source
	return func() sdk.Source {
		mu.Lock()
		defer mu.Unlock()
		if prev != nil {
			prev.closeClient()
		}
		prev = New()
		return prev
	}
}

// wantReplica fails unless local partition lp holds exactly the remote messages of remote
// partition rp from offset 0 to n−1, in order, each once: id, origin timestamp, payload,
// the remote's own headers, and the origin headers.
func wantReplica(t *testing.T, got []sdktest.Stored, rp uint32, n int, createdAt uint64) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("local partition holds %d messages of remote partition %d, want %d", len(got), rp, n)
	}
	for i, s := range got {
		m := s.Message
		lo, _ := m.ID.Halves()
		if lo != uint64(rp)<<32|uint64(i+1) || string(m.Payload) != fmt.Sprintf("p%d-m%d", rp, i) || m.OriginTimestamp != 1e15+uint64(i) {
			t.Fatalf("message %d: id %x payload %q origin %d; want remote partition %d message %d", i, lo, m.Payload, m.OriginTimestamp, rp, i)
		}
		want := []string{"n=" + fmt.Sprint(i), HeaderStream + "=origin", HeaderTopic + "=events",
			HeaderPartition + "=" + fmt.Sprint(rp), HeaderCreatedAt + "=" + fmt.Sprint(createdAt), HeaderOffset + "=" + fmt.Sprint(i)}
		var have []string
		for _, h := range m.Headers {
			v, err := h.Value.AsString()
			if err != nil {
				t.Fatalf("message %d header %s: %v", i, h.Key.Value, err)
			}
			have = append(have, string(h.Key.Value)+"="+v)
		}
		if fmt.Sprint(have) != fmt.Sprint(want) {
			t.Fatalf("message %d headers %v, want %v", i, have, want)
		}
	}
}

func (r *remote) createdAt(t *testing.T) uint64 {
	t.Helper()
	tp, err := r.Admin.GetTopic(r.Ctx(), iggyclient.Name(r.stream), iggyclient.Name(r.topic))
	if err != nil {
		t.Fatal(err)
	}
	return tp.CreatedAt
}

// TestReplicateSameCrashAtEveryStep: remote partition n → local partition n, exactly
// once, with a crash at every step of the runtime's sequence (the one between the append
// and the ack included: the read-back skips what the local topic holds).
func TestReplicateSameCrashAtEveryStep(t *testing.T) {
	r := startRemote(t, 3)
	r.fill(t, 3, 0, 15)
	created := r.createdAt(t)
	sdktest.SourceHarness{
		New:        crashing(),
		Config:     r.config(nil),
		Partitions: 3,
		Reset:      func(ctx context.Context) error { return r.deleteGroup(ctx, "ferry-replicate-test") },
		Done:       func(l *sdktest.Log) bool { return l.Len() >= 45 },
		Check: func(t *testing.T, l *sdktest.Log) {
			for p := range uint32(3) {
				wantReplica(t, l.Partition(int(p)), p, 15, created)
			}
		},
	}.CrashAtEveryStep(t)
}

// TestReplicateKeyCrashAtEveryStep: three remote partitions into two local ones by the
// remote partition's number; each remote partition's messages stay together and in order,
// exactly once across a crash at every step.
func TestReplicateKeyCrashAtEveryStep(t *testing.T) {
	r := startRemote(t, 3)
	r.fill(t, 3, 0, 10)
	created := r.createdAt(t)
	sdktest.SourceHarness{
		New:        crashing(),
		Config:     r.config(map[string]any{"partitioning": "key", "batch_size": 4, "max_unacked": 2}),
		Partitions: 2,
		Reset:      func(ctx context.Context) error { return r.deleteGroup(ctx, "ferry-replicate-test") },
		Done:       func(l *sdktest.Log) bool { return l.Len() >= 30 },
		Check: func(t *testing.T, l *sdktest.Log) {
			byRemote := map[uint32][]sdktest.Stored{}
			where := map[uint32]int{}
			for lp := range 2 {
				for _, s := range l.Partition(lp) {
					f, _ := sdk.Lookup(s.Message.Headers, HeaderPartition)
					rp, _ := f.AsUint64()
					if w, ok := where[uint32(rp)]; ok && w != lp {
						t.Fatalf("remote partition %d found in local partitions %d and %d", rp, w, lp)
					}
					where[uint32(rp)] = lp
					byRemote[uint32(rp)] = append(byRemote[uint32(rp)], s)
				}
			}
			for rp := range uint32(3) {
				wantReplica(t, byRemote[rp], rp, 10, created)
			}
		},
	}.CrashAtEveryStep(t)
}

// openOn opens a source over log and reads until the log holds want messages.
func openOn(t *testing.T, cfg map[string]any, log *sdktest.Log, want int) *Source {
	t.Helper()
	s := New()
	ctx := context.Background()
	if err := s.Open(ctx, sdktest.SourceEnv(t, cfg, nil, log)); err != nil {
		t.Fatal(err)
	}
	for log.Len() < want {
		b, ack, err := s.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		log.Append(b.Messages)
		if err := ack(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestRecreatedRemoteTopicIsReplicatedAgain: a remote topic deleted and created again is
// a new topic: its messages (offsets from 0 again) are replicated, not skipped as held,
// both while the source runs and by a source opened afterwards over the same local topic.
func TestRecreatedRemoteTopicIsReplicatedAgain(t *testing.T) {
	r := startRemote(t, 1)
	r.fill(t, 1, 0, 5)
	log := sdktest.NewLog(1)
	cfg := r.config(nil)
	s := openOn(t, cfg, log, 5)

	ctx := r.Ctx()
	if err := r.Admin.DeleteTopic(ctx, iggyclient.Name(r.stream), iggyclient.Name(r.topic)); err != nil {
		t.Fatal(err)
	}
	r.Topic(r.stream, r.topic, 1)
	r.fill(t, 1, 0, 3)
	for log.Len() < 8 {
		b, ack, err := s.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		log.Append(b.Messages)
		if err := ack(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if g := s.Gauges(); g[2].Value != 1 {
		t.Fatalf("remote_topic_replaced = %d, want 1", g[2].Value)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	created := r.createdAt(t)
	wantReplica(t, log.Partition(0)[5:], 0, 3, created)

	// A new source over the same local topic (its last message: the new topic's offset
	// 2) and a recreated remote again: the three new messages are replicated too.
	if err := r.Admin.DeleteTopic(ctx, iggyclient.Name(r.stream), iggyclient.Name(r.topic)); err != nil {
		t.Fatal(err)
	}
	r.Topic(r.stream, r.topic, 1)
	r.fill(t, 1, 0, 3)
	s2 := openOn(t, cfg, log, 11)
	defer func() { _ = s2.Close(ctx) }()
	wantReplica(t, log.Partition(0)[8:], 0, 3, r.createdAt(t))
}

// TestPurgedRemoteIsReplicatedAgain: the local topic holds remote offsets 0..4; the remote
// partition is purged and refilled with other messages at those offsets: the read-back's
// check finds the remote message at offset 4 is not the one held, and replicates all.
func TestPurgedRemoteIsReplicatedAgain(t *testing.T) {
	r := startRemote(t, 1)
	r.fill(t, 1, 0, 5)
	log := sdktest.NewLog(1)
	cfg := r.config(nil)
	s := openOn(t, cfg, log, 5)
	if err := s.Close(r.Ctx()); err != nil {
		t.Fatal(err)
	}
	if err := r.Admin.PurgeTopic(r.Ctx(), iggyclient.Name(r.stream), iggyclient.Name(r.topic)); err != nil {
		t.Fatal(err)
	}
	if err := r.deleteGroup(r.Ctx(), "ferry-replicate-test"); err != nil {
		t.Fatal(err)
	}
	r.fill(t, 1, 100, 5) // ids and payloads of messages 100..104 at offsets 0..4
	s2 := openOn(t, cfg, log, 10)
	defer func() { _ = s2.Close(r.Ctx()) }()
	got := log.Partition(0)[5:]
	for i, m := range got {
		if want := fmt.Sprintf("p0-m%d", 100+i); string(m.Message.Payload) != want {
			t.Fatalf("message %d after the purge = %q, want %q", i, m.Message.Payload, want)
		}
	}
}

// TestHeldMessagesSkippedAndCounted: a local topic that already holds remote offsets 0..5
// (a crash after the append, before the remote offset was stored) gets only 6.. on replay,
// and the skip is counted.
func TestHeldMessagesSkippedAndCounted(t *testing.T) {
	r := startRemote(t, 1)
	r.fill(t, 1, 0, 10)
	log := sdktest.NewLog(1)
	cfg := r.config(nil)
	s := New()
	ctx := r.Ctx()
	if err := s.Open(ctx, sdktest.SourceEnv(t, cfg, nil, log)); err != nil {
		t.Fatal(err)
	}
	b, _, err := s.Read(ctx) // 7 messages: appended, never acknowledged (the crash)
	if err != nil {
		t.Fatal(err)
	}
	log.Append(b.Messages[:6])
	s.closeClient()
	s2 := openOn(t, cfg, log, 10)
	defer func() { _ = s2.Close(ctx) }()
	wantReplica(t, log.Partition(0), 0, 10, r.createdAt(t))
	if g := s2.Gauges(); g[1].Value != 6 {
		t.Fatalf("skipped_held = %d, want 6", g[1].Value)
	}
	r.WantStored("ferry-replicate-test", r.stream, r.topic, 0, 9)
}

// TestOpenErrors: what a user gets wrong is named, with where; what cannot get better by
// retrying is permanent.
func TestOpenErrors(t *testing.T) {
	r := startRemote(t, 3)
	closed := iggykit.Start(t)
	addr := closed.Addr
	closed.Server.Close(context.Background())
	for _, c := range []struct {
		name      string
		cfg       map[string]any
		local     int
		permanent bool
		want      []string
	}{
		{"unreachable", r.config(map[string]any{"address": addr}), 3, false, []string{"connect to the remote Iggy server at " + addr, "as user iggy"}},
		{"wrong password", r.config(map[string]any{"password": "nope"}), 3, true, []string{"connect to the remote Iggy server at " + r.Addr + " as user " + servertest.Username, "InvalidCredentials"}},
		{"missing stream", r.config(map[string]any{"stream": "nosuch"}), 3, false, []string{"remote nosuch/events at " + r.Addr}},
		{"missing topic", r.config(map[string]any{"topic": "nosuch"}), 3, false, []string{"remote origin/nosuch at " + r.Addr}},
		{"too few local partitions", r.config(nil), 2, true, []string{`needs the local topic to have at least the 3 partitions of remote origin/events`, "it has 2"}},
		{"no address", map[string]any{"stream": "s", "topic": "t"}, 3, true, []string{"plugin_config.address", "set one of address, addresses"}},
		{"token file", r.config(map[string]any{"token": "file:/nonexistent/pat"}), 3, true, []string{"plugin_config.token: read the token file"}},
		{"wrong token", r.config(map[string]any{"token": "nope"}), 3, true, []string{"connect to the remote Iggy server at " + r.Addr + " as a personal access token", "InvalidPersonalAccessToken"}},
		{"tls without ca", r.config(map[string]any{"tls_enabled": true}), 3, true, []string{"plugin_config.tls_ca_file"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New()
			err := s.Open(context.Background(), sdktest.SourceEnv(t, c.cfg, nil, sdktest.NewLog(c.local)))
			if err == nil {
				_ = s.Close(context.Background())
				t.Fatal("open succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if got := errors.Is(err, sdk.ErrPermanent); got != c.permanent {
				t.Errorf("permanent = %v, want %v (%v)", got, c.permanent, err)
			}
			if strings.Contains(err.Error(), "nope") {
				t.Errorf("the password shows in %q", err)
			}
		})
	}
}

// TestNackStopsTheSource: a batch the runtime could not deliver stops the source (the next
// Read is permanent) and nothing is stored on the remote; a restart replays it.
func TestNackStopsTheSource(t *testing.T) {
	r := startRemote(t, 1)
	r.fill(t, 1, 0, 3)
	log := sdktest.NewLog(1)
	s := New()
	ctx := r.Ctx()
	if err := s.Open(ctx, sdktest.SourceEnv(t, r.config(nil), nil, log)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(ctx) }()
	_, ack, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ack(ctx, fmt.Errorf("stopping")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Read(ctx); !errors.Is(err, sdk.ErrPermanent) {
		t.Fatalf("read after a nack: %v, want a permanent error", err)
	}
	if _, found := r.Stored("ferry-replicate-test", r.stream, r.topic, 0); found {
		t.Fatal("an offset was stored for a nacked batch")
	}
}
