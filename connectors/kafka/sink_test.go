package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/kafkatest"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// sinkConfig is the plugin_config of a sink writing to topic of b.
func sinkConfig(b *kafkatest.Broker, topic string, extra map[string]any) map[string]any {
	c := map[string]any{"bootstrap_servers": []string{b.Bootstrap}, "topic": topic,
		"offsets_topic": topic + ".offsets", "transaction_timeout": "10s"}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// readPayloads reads topic with kafka-python (read_committed) as the harness's records:
// the Iggy partition and offset are the payload's p and o.
func readPayloads(b *kafkatest.Broker, topic string) func(ctx context.Context) ([]sdktest.Record, error) {
	return func(ctx context.Context) ([]sdktest.Record, error) {
		recs, err := b.ReadCommitted(ctx, topic)
		if err != nil {
			return nil, err
		}
		out := make([]sdktest.Record, 0, len(recs))
		for _, r := range recs {
			var v struct{ P, O uint64 }
			if err := json.Unmarshal(r.Value, &v); err != nil {
				return nil, fmt.Errorf("partition %d offset %d: value %q: %w", r.Partition, r.Offset, r.Value, err)
			}
			if int32(v.P) != r.Partition {
				return nil, fmt.Errorf("Iggy partition %d's message %d is in Kafka partition %d (partitioning = same)", v.P, v.O, r.Partition)
			}
			out = append(out, sdktest.Record{Partition: uint32(v.P), Offset: v.O, Payload: r.Value})
		}
		return out, nil
	}
}

// TestSinkExactlyOnceAtEveryCrash runs the sink against the real broker through the
// harness's steps (assignment and seek, batches, a rebalance, close) with a crash at each:
// kafka-python, read_committed, finds every message once, in its partition.
func TestSinkExactlyOnceAtEveryCrash(t *testing.T) {
	b := kafkatest.Connect(t)
	var topic string
	cfg := map[string]any{}
	h := sdktest.SinkHarness{
		New:            func() sdk.Sink { return New() },
		Config:         cfg,
		SinkControlled: true,
		Guarantee:      sdktest.ExactlyOnce,
		Messages:       25,
		Batch:          10,
		Reset: func(context.Context) error {
			topic = b.Topic(t, 3)
			for k, v := range sinkConfig(b, topic, nil) {
				cfg[k] = v
			}
			return nil
		},
		Read: func(ctx context.Context) ([]sdktest.Record, error) { return readPayloads(b, topic)(ctx) },
	}
	h.CrashAtEveryStep(t)
}

// TestSinkRecords: keys, headers, partitioning and the offsets record as a Kafka consumer
// sees them.
func TestSinkRecords(t *testing.T) {
	b := kafkatest.Connect(t)
	dest := kafkatest.Name(t, "dest")
	topic := "ferrytest." + dest
	b.CreateTopic(t, topic, 2)
	c := sdktest.NewCommitter()
	s := New()
	ctx := context.Background()
	cfg := sinkConfig(b, "{stream}.{header:dest}", map[string]any{"key_from": "header:kafka_key", "offsets_topic": topic + ".offsets"})
	if err := s.Open(ctx, sdktest.SinkEnv(t, cfg, c)); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	tm := sdk.TopicMetadata{Stream: "ferrytest", Topic: "orders", StreamID: 1, TopicID: 1}
	p := sdk.Partition{StreamID: 1, TopicID: 1, PartitionID: 3}
	if _, err := s.Assigned(ctx, tm, []sdk.Partition{p}); err != nil {
		t.Fatal(err)
	}
	c.Assign(p, 0)
	msgs := []sdk.ConsumedMessage{
		{Offset: 0, ID: sdk.MessageIDFromUint64(7), Payload: []byte("one"), Headers: []sdk.Header{
			{Key: sdk.String("dest"), Value: sdk.String(dest)},
			{Key: sdk.String("kafka_key"), Value: sdk.HeaderField{Kind: sdk.HeaderRaw, Value: []byte("k1")}},
			{Key: sdk.String("kafka_offset"), Value: sdk.Uint64(99)},
			{Key: sdk.String("n"), Value: sdk.Uint64(42)},
		}},
		{Offset: 1, ID: sdk.MessageIDFromUint64(8), Payload: []byte("two"), Headers: []sdk.Header{
			{Key: sdk.String("dest"), Value: sdk.String(dest)},
		}},
	}
	if err := sdktest.Consume(ctx, s, c, tm, p, msgs); err != nil {
		t.Fatal(err)
	}
	if off, ok := c.Committed(p); !ok || off != 1 {
		t.Fatalf("committed %d %v, want 1", off, ok)
	}
	recs, err := b.ReadCommitted(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(recs)
	// Iggy partition 3 → Kafka partition 3 % 2 = 1; kafka_key is the key and not a header
	// (drop_headers), numbers are text.
	want := "[{1 0 [107 49] [111 110 101] [[dest " + dest + "] [n 42]]} {1 1 [] [116 119 111] [[dest " + dest + "]]}]"
	if got != want {
		t.Fatalf("records\n got %s\nwant %s", got, want)
	}
	if recs[1].Key != nil {
		t.Fatalf("a message without the key header has key %q, want none", recs[1].Key)
	}
	offs, err := b.ReadCommitted(ctx, topic+".offsets")
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, r := range offs {
		if string(r.Key) == "test/"+tm.Stream+"/orders/3" {
			last = string(r.Value)
		}
	}
	if last != `{"offset":1}` {
		t.Fatalf("offsets record %q, want {\"offset\":1}", last)
	}
}

// TestSinkZombieFenced: a second instance assigned the same partition fences the first
// (a zombie after a rebalance): the zombie's next batch is not written, and the new owner
// resumes after what the zombie committed, so every message is in Kafka once.
func TestSinkZombieFenced(t *testing.T) {
	b := kafkatest.Connect(t)
	topic := b.Topic(t, 1)
	ctx := context.Background()
	cfg := sinkConfig(b, topic, nil)
	p := sdktest.Part(0)
	open := func() (*Sink, *sdktest.Committer) {
		c := sdktest.NewCommitter()
		s := New()
		if err := s.Open(ctx, sdktest.SinkEnv(t, cfg, c)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(ctx) })
		next, err := s.Assigned(ctx, sdktest.Topic, []sdk.Partition{p})
		if err != nil {
			t.Fatal(err)
		}
		c.Assign(p, next[p])
		return s, c
	}
	a, ca := open()
	if err := sdktest.Consume(ctx, a, ca, sdktest.Topic, p, sdktest.Messages(0, 0, 10, nil)); err != nil {
		t.Fatal(err)
	}
	bb, cb := open() // the new owner: fences a
	if next, _ := cb.Done(p); next != 10 {
		t.Fatalf("the new owner resumes at %d, want 10", next)
	}
	// The zombie's next batch: its transaction is refused (fenced), and settling it
	// fences back and reads that nothing of it landed; the runtime retries, the zombie's
	// Iggy commit would be refused once its partition is revoked.
	zerr := sdktest.Consume(ctx, a, ca, sdktest.Topic, p, sdktest.Messages(0, 10, 10, nil))
	ca.RevokeAll()
	// The new owner writes the same range: fenced by the zombie's fence-back, it settles
	// the same way and its retry writes it.
	retry := sdk.Retry{Initial: 10 * time.Millisecond, Max: time.Second, Attempts: 5}
	if err := retry.Do(ctx, func(ctx context.Context, _ int) error {
		return sdktest.Consume(ctx, bb, cb, sdktest.Topic, p, sdktest.Messages(0, 10, 10, nil))
	}); err != nil {
		t.Fatalf("the new owner's batch: %v (the zombie's: %v)", err, zerr)
	}
	recs, err := readPayloads(b, topic)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	for _, r := range recs {
		seen[r.Offset]++
	}
	for o := range uint64(20) {
		if seen[o] != 1 {
			t.Fatalf("offset %d is in Kafka %d times (zombie: %v); all: %v", o, seen[o], zerr, seen)
		}
	}
	if len(recs) != 20 {
		t.Fatalf("%d records, want 20", len(recs))
	}
}

// TestSinkErrors: a broker that does not answer, wrong credentials and a missing topic
// fail with errors naming what and where; wrong credentials are permanent.
func TestSinkErrors(t *testing.T) {
	b := kafkatest.Connect(t)
	ctx := context.Background()
	open := func(cfg map[string]any) error {
		s := New()
		err := s.Open(ctx, sdktest.SinkEnv(t, cfg, sdktest.NewCommitter()))
		if err == nil {
			t.Cleanup(func() { _ = s.Close(ctx) })
		}
		return err
	}
	err := open(map[string]any{"bootstrap_servers": []string{"127.0.0.1:1"}, "dial_timeout": "200ms"})
	if err == nil || !strings.Contains(err.Error(), "kafka sink test: no broker of bootstrap_servers 127.0.0.1:1 answers") || errors.Is(err, sdk.ErrPermanent) {
		t.Fatalf("a broker that is down: %v (want a retryable error naming bootstrap_servers)", err)
	}
	if b.SASLBootstrap != "" {
		err = open(map[string]any{"bootstrap_servers": []string{b.SASLBootstrap}, "sasl_mechanism": "SCRAM-SHA-256",
			"sasl_username": b.User, "sasl_password": "wrong"})
		if err == nil || !errors.Is(err, sdk.ErrPermanent) || !strings.Contains(err.Error(), `SASL SCRAM-SHA-256 user "`+b.User+`"`) || strings.Contains(err.Error(), "wrong") {
			t.Fatalf("wrong credentials: %v (want a permanent error naming the mechanism and user, never the password)", err)
		}
		for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
			if err := open(map[string]any{"bootstrap_servers": []string{b.SASLBootstrap}, "sasl_mechanism": mech,
				"sasl_username": b.User, "sasl_password": b.Password}); err != nil {
				t.Fatalf("%s with the right password: %v", mech, err)
			}
		}
	}
	if b.TLSBootstrap != "" {
		if err := open(map[string]any{"bootstrap_servers": []string{b.TLSBootstrap}, "tls_enabled": true, "tls_ca_file": b.CAFile}); err != nil {
			t.Fatalf("TLS with the CA: %v", err)
		}
		err := open(map[string]any{"bootstrap_servers": []string{b.TLSBootstrap}, "tls_enabled": true})
		if err == nil || !errors.Is(err, sdk.ErrPermanent) {
			t.Fatalf("TLS without the CA: %v (want a permanent certificate error)", err)
		}
	}
	// A topic that does not exist: the batch fails naming it, and nothing is committed.
	c := sdktest.NewCommitter()
	s := New()
	if err := s.Open(ctx, sdktest.SinkEnv(t, sinkConfig(b, "no-such-topic-"+kafkatest.Name(t, "x"), nil), c)); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	p := sdktest.Part(0)
	if _, err := s.Assigned(ctx, sdktest.Topic, []sdk.Partition{p}); err != nil {
		t.Fatal(err)
	}
	c.Assign(p, 0)
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err = sdktest.Consume(cctx, s, c, sdktest.Topic, p, sdktest.Messages(0, 0, 3, nil))
	if err == nil || !strings.Contains(err.Error(), "produce to no-such-topic-") || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("a missing topic: %v", err)
	}
	if _, ok := c.Committed(p); ok {
		t.Fatal("a batch to a missing topic was committed")
	}
}

// TestSinkConfigErrors: each bad key is named.
func TestSinkConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  string
		want string
	}{
		{`{}`, "plugin_config.bootstrap_servers: required"},
		{`{"bootstrap_servers":["localhost"]}`, `plugin_config.bootstrap_servers: "localhost" is not host:port`},
		{`{"bootstrap_servers":["a:1"],"sasl_mechanism":"PLAIN"}`, "sasl_username"},
		{`{"bootstrap_servers":["a:1"],"topic":"{nope}"}`, "unknown placeholder {nope}"},
		{`{"bootstrap_servers":["a:1"],"key_from":"head:x"}`, `plugin_config.key_from: "head:x": want id, none or header:NAME`},
		{`{"bootstrap_servers":["a:1"],"compression":"brotli"}`, "plugin_config.compression"},
	} {
		_, err := Config.Parse([]byte(tc.cfg))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if err := New().Open(context.Background(), sdktest.SinkEnv(t, `{"bootstrap_servers":["a:1"]}`, nil)); err == nil || !strings.Contains(err.Error(), "sink_controlled") {
		t.Fatalf("without a Committer: %v", err)
	}
}
