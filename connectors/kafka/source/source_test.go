package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ferryio/ferry/internal/kafkatest"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// fill writes n records to each of parts partitions of topic: key k<p>-<i>, value
// v<p>-<i>, header h = <i>.
func fill(t *testing.T, b *kafkatest.Broker, topic string, parts, n int) {
	t.Helper()
	var recs []*kgo.Record
	for p := range parts {
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: fmt.Appendf(nil, "k%d-%d", p, i),
				Value: fmt.Appendf(nil, "v%d-%d", p, i), Headers: []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}}})
		}
	}
	b.Produce(t, recs...)
}

// manual is a producer that writes to the partition each record names.
func manual(t *testing.T, b *kafkatest.Broker) *kafkatest.Broker {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c := *b
	c.Client = cl
	return &c
}

// origin is what a message in the log says of its record.
func origin(t *testing.T, m sdk.ProducedMessage) (string, uint64, uint64) {
	t.Helper()
	tp, _ := sdk.Lookup(m.Headers, HeaderTopic)
	p, _ := sdk.Lookup(m.Headers, HeaderPartition)
	o, _ := sdk.Lookup(m.Headers, HeaderOffset)
	pn, err1 := p.AsUint64()
	on, err2 := o.AsUint64()
	if err1 != nil || err2 != nil {
		t.Fatalf("message without its origin headers: %v", m.Headers)
	}
	return string(tp.Value), pn, on
}

// TestSourceExactlyOnceAtEveryCrash runs the source against the real broker through the
// harness's steps with a crash at each (the crashed instance leaves the group without
// committing anything more): the topic holds every record once, in its partition, with
// its key and headers.
func TestSourceExactlyOnceAtEveryCrash(t *testing.T) {
	b := manual(t, kafkatest.Connect(t))
	const parts, per = 3, 8
	cfg := map[string]any{}
	var last *Source
	h := sdktest.SourceHarness{
		New: func() sdk.Source {
			if last != nil {
				last.abandon() // the crashed instance (a no-op after Close)
			}
			last = New()
			return last
		},
		Config:     cfg,
		Partitions: parts,
		Reset: func(context.Context) error {
			topic := b.Topic(t, parts)
			fill(t, b, topic, parts, per)
			cfg["bootstrap_servers"] = []string{b.Bootstrap}
			cfg["topics"] = []string{topic}
			cfg["consumer_group"] = kafkatest.Name(t, "g")
			cfg["batch_size"] = 6
			return nil
		},
		Done: func(l *sdktest.Log) bool { return l.Len() >= parts*per },
		Check: func(t *testing.T, l *sdktest.Log) {
			seen := map[string]int{}
			for _, s := range l.All() {
				_, p, o := origin(t, s.Message)
				if uint64(s.Partition) != p {
					t.Errorf("Kafka partition %d offset %d is in Iggy partition %d (partitioning = same)", p, o, s.Partition)
				}
				want := fmt.Sprintf("v%d-%d", p, o)
				if string(s.Message.Payload) != want {
					t.Errorf("partition %d offset %d: payload %q, want %q", p, o, s.Message.Payload, want)
				}
				if k, _ := sdk.Lookup(s.Message.Headers, HeaderKey); string(k.Value) != fmt.Sprintf("k%d-%d", p, o) {
					t.Errorf("partition %d offset %d: kafka_key %q", p, o, k.Value)
				}
				if hv, _ := sdk.Lookup(s.Message.Headers, "h"); string(hv.Value) != fmt.Sprint(o) {
					t.Errorf("partition %d offset %d: header h %q", p, o, hv.Value)
				}
				seen[fmt.Sprintf("%d/%d", p, o)]++
			}
			for p := range parts {
				for o := range per {
					if n := seen[fmt.Sprintf("%d/%d", p, o)]; n != 1 {
						t.Errorf("partition %d offset %d: %d times in Iggy, want once", p, o, n)
					}
				}
			}
		},
	}
	h.CrashAtEveryStep(t)
	if last != nil {
		last.abandon()
	}
}

// TestSourceUnrepresentable: a record Iggy cannot hold stops the source naming it, or is
// skipped with skip_unrepresentable.
func TestSourceUnrepresentable(t *testing.T) {
	b := kafkatest.Connect(t)
	topic := b.Topic(t, 1)
	b.Produce(t, &kgo.Record{Topic: topic, Value: []byte("a")}, &kgo.Record{Topic: topic, Value: nil, Key: []byte("tombstone")},
		&kgo.Record{Topic: topic, Value: []byte("c")})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	read := func(skip bool) ([]string, error) {
		s := New()
		cfg := map[string]any{"bootstrap_servers": []string{b.Bootstrap}, "topics": []string{topic},
			"consumer_group": kafkatest.Name(t, "g"), "skip_unrepresentable": skip}
		if err := s.Open(ctx, sdktest.SourceEnv(t, cfg, nil, sdktest.NewLog(1))); err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		var got []string
		for len(got) < 2 {
			batch, ack, err := s.Read(ctx)
			if err != nil {
				return got, err
			}
			for _, m := range batch.Messages {
				got = append(got, string(m.Payload))
			}
			_ = ack(ctx, nil)
		}
		return got, nil
	}
	_, err := read(false)
	if err == nil || !errors.Is(err, sdk.ErrPermanent) || !strings.Contains(err.Error(), fmt.Sprintf("topic %q partition 0 offset 1: an empty or null value", topic)) {
		t.Fatalf("a tombstone: %v", err)
	}
	got, err := read(true)
	if err != nil || fmt.Sprint(got) != "[a c]" {
		t.Fatalf("skip_unrepresentable: %v %v, want [a c]", got, err)
	}
}

// TestSourceErrors: a broker that does not answer, wrong credentials and a missing topic
// fail at Open naming what and where.
func TestSourceErrors(t *testing.T) {
	b := kafkatest.Connect(t)
	ctx := context.Background()
	open := func(cfg map[string]any) error {
		s := New()
		err := s.Open(ctx, sdktest.SourceEnv(t, cfg, nil, nil))
		if err == nil {
			_ = s.Close(ctx)
		}
		return err
	}
	topic := b.Topic(t, 1)
	err := open(map[string]any{"bootstrap_servers": []string{"127.0.0.1:1"}, "topics": []string{topic}, "dial_timeout": "200ms"})
	if err == nil || !strings.Contains(err.Error(), "kafka source test: no broker of bootstrap_servers 127.0.0.1:1 answers") || errors.Is(err, sdk.ErrPermanent) {
		t.Fatalf("a broker that is down: %v", err)
	}
	err = open(map[string]any{"bootstrap_servers": []string{b.Bootstrap}, "topics": []string{topic, "no-such-topic"}})
	if err == nil || !strings.Contains(err.Error(), `plugin_config.topics: the cluster at bootstrap_servers `+b.Bootstrap+` has no topic ["no-such-topic"]`) {
		t.Fatalf("a missing topic: %v", err)
	}
	if b.SASLBootstrap != "" {
		err = open(map[string]any{"bootstrap_servers": []string{b.SASLBootstrap}, "topics": []string{topic},
			"sasl_mechanism": "PLAIN", "sasl_username": b.User, "sasl_password": "wrong-password"})
		if err == nil || !errors.Is(err, sdk.ErrPermanent) || !strings.Contains(err.Error(), `(SASL PLAIN user "`+b.User+`")`) || strings.Contains(err.Error(), "wrong-password") {
			t.Fatalf("wrong credentials: %v", err)
		}
	}
	for _, tc := range []struct{ cfg, want string }{
		{`{"bootstrap_servers":["a:1"]}`, "topics"},
		{`{"bootstrap_servers":["a:1"],"topics":["x"],"topic_pattern":"y"}`, "topic_pattern"},
		{`{"bootstrap_servers":["a:1"],"topic_pattern":"("}`, "plugin_config.topic_pattern"},
		{`{"bootstrap_servers":["a:1"],"topics":["x"],"start_from":"middle"}`, "plugin_config.start_from"},
		{`{"bootstrap_servers":["a:1"],"topics":["x"],"partitioning":"random"}`, "plugin_config.partitioning"},
	} {
		if _, err := Config.Parse([]byte(tc.cfg)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
