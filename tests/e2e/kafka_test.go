package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/kafkatest"
	"github.com/ferryio/ferry/internal/testkit"
)

// kafkaRun is the size of one Kafka round trip under SIGKILL. CI runs kafkaSmall;
// FERRY_KAFKA_SOAK=1 runs the full size.
type kafkaRun struct {
	perPartition, kills int
}

var (
	kafkaSmall = kafkaRun{perPartition: 2000, kills: 3}
	kafkaSoak  = kafkaRun{perPartition: 30000, kills: 10}
)

const kafkaPartitions = 3

// kafkaSourceFile is the Kafka source of the round trip: Kafka topic in → Iggy s/k. A
// killed process stays a member of the Kafka group until its session times out, and the
// next rebalance waits for it: the session is the broker's shortest, 6 s.
func kafkaSourceFile(key, bootstrap, in, group string) string {
	return kafkaSourceFileWith(key, bootstrap, in, group, "session_timeout = \"6s\"\n")
}

// kafkaSourceFileWith is kafkaSourceFile with more plugin_config lines.
func kafkaSourceFileWith(key, bootstrap, in, group, extra string) string {
	return fmt.Sprintf(`type = "source"
key = %q
enabled = true
version = 0
name = "kafka in"
path = "builtin:kafka"
max_in_flight = 4

[[streams]]
stream = "s"
topic = "k"
schema = "raw"
batch_length = 1000

[plugin_config]
bootstrap_servers = [%q]
topics = [%q]
consumer_group = %q
batch_size = 500
%s`, key, bootstrap, in, group, extra)
}

// kafkaSinkFile is the Kafka sink of the round trip: Iggy s/k → Kafka topic out, the
// records' original keys from kafka_key.
func kafkaSinkFile(key, bootstrap, out string) string {
	return fmt.Sprintf(`type = "sink"
key = %q
enabled = true
version = 0
name = "kafka out"
path = "builtin:kafka"
offset_commit = "sink_controlled"
max_in_flight = 3

[[streams]]
stream = "s"
topics = ["k"]
schema = "raw"
batch_length = 500
poll_interval = "5ms"

[plugin_config]
bootstrap_servers = [%q]
topic = %q
key_from = "header:kafka_key"
offsets_topic = %q
transaction_timeout = "20s"
`, key, bootstrap, out, out+".offsets")
}

// kafkaWriter writes per records to each partition of topic in batches of 100, never more
// than allowed(n) of the n batches (the kills spread over the write: each kill of the
// source lands while records flow), one batch each 20 ms at most; it returns when done or
// on the first error.
// writerProgress is what kafkaWriter has written so far, and whether it is waiting for its
// next allowance: a reader that holds every record written while the writer waits has
// caught up, and waiting for more before the next kill would wait for ever.
type writerProgress struct {
	written atomic.Uint64
	waiting atomic.Bool
}

// caughtUp: the writer waits for its allowance and n records hold all it wrote.
func (w *writerProgress) caughtUp(n uint64) bool {
	return w != nil && w.waiting.Load() && n >= w.written.Load()
}

func kafkaWriter(ctx context.Context, b *kafkatest.Broker, topic string, per int, allowed func(batches int) int, progress *writerProgress) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	const batch = 100
	for i := 0; i < per; i += batch {
		for i/batch >= allowed((per+batch-1)/batch) {
			if progress != nil {
				progress.waiting.Store(true)
			}
			time.Sleep(20 * time.Millisecond) // a producer's pace, waiting for the next kill
		}
		if progress != nil {
			progress.waiting.Store(false)
		}
		var recs []*kgo.Record
		for p := range kafkaPartitions {
			for j := i; j < min(i+batch, per); j++ {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: fmt.Appendf(nil, "k%d-%d", p, j),
					Value:   fmt.Appendf(nil, "v%d-%d-%s", p, j, strings.Repeat("x", 150)),
					Headers: []kgo.RecordHeader{{Key: "seq", Value: fmt.Appendf(nil, "%d", j)}, {Key: "src", Value: []byte("e2e")}}})
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Minute) // across the broker restart
		err := cl.ProduceSync(pctx, recs...).FirstErr()
		cancel()
		if err != nil {
			return fmt.Errorf("write records %d..%d: %w", i, i+batch-1, err)
		}
		if progress != nil {
			progress.written.Add(uint64(len(recs)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// judgeKafkaOut checks the out topic as kafka-python reads it (read_committed): every
// record of in exactly once, in its partition, in order, with its key and headers.
func judgeKafkaOut(t *testing.T, b *kafkatest.Broker, out string, per int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	recs, err := b.ReadCommitted(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	next := make([]int, kafkaPartitions) // per partition: the next seq expected
	var problems []string
	for _, r := range recs {
		seqText, _ := r.Header("seq")
		seq, err := strconv.Atoi(seqText)
		if err != nil || r.Partition < 0 || r.Partition >= kafkaPartitions {
			problems = append(problems, fmt.Sprintf("partition %d offset %d: no seq header (%v)", r.Partition, r.Offset, r.Headers))
			continue
		}
		p := int(r.Partition)
		switch {
		case seq < next[p]:
			problems = append(problems, fmt.Sprintf("partition %d: seq %d again at offset %d (duplicate or out of order; expected %d)", p, seq, r.Offset, next[p]))
		case seq > next[p]:
			problems = append(problems, fmt.Sprintf("partition %d: seq %d..%d missing (offset %d has %d)", p, next[p], seq-1, r.Offset, seq))
		}
		next[p] = max(next[p], seq+1)
		if string(r.Key) != fmt.Sprintf("k%d-%d", p, seq) || !strings.HasPrefix(string(r.Value), fmt.Sprintf("v%d-%d-", p, seq)) {
			problems = append(problems, fmt.Sprintf("partition %d seq %d: key %q value %.12q", p, seq, r.Key, r.Value))
		}
		if src, _ := r.Header("src"); src != "e2e" || len(r.Headers) != 2 {
			problems = append(problems, fmt.Sprintf("partition %d seq %d: headers %v, want seq and src only", p, seq, r.Headers))
		}
		if len(problems) > 20 {
			break
		}
	}
	for p := range kafkaPartitions {
		if next[p] != per {
			problems = append(problems, fmt.Sprintf("partition %d: %d records, want %d", p, next[p], per))
		}
	}
	if len(problems) > 0 || len(recs) != kafkaPartitions*per {
		t.Fatalf("out holds %d records, want %d exactly once:\n%s", len(recs), kafkaPartitions*per, strings.Join(problems, "\n"))
	}
}

// judgeIggy checks that Iggy's s/k holds every record of in once, partition p's records
// in Iggy partition p in order.
func judgeIggy(t *testing.T, c *iggy.Client, per int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for p := range uint32(kafkaPartitions) {
		var offs []uint64
		next := uint64(0)
		for {
			r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(11)},
				Stream: iggy.Name("s"), Topic: iggy.Name("k"), Partition: &p, Strategy: wire.PollOffset(next), Count: 5000})
			if err != nil {
				t.Fatalf("poll partition %d at %d: %v", p, next, err)
			}
			if len(r.Messages) == 0 {
				r.Release()
				break
			}
			for i := range r.Messages {
				m := &r.Messages[i]
				kvs, err := m.Headers(nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, kv := range kvs {
					if string(kv.Key.Raw) == "kafka_offset" {
						var v uint64
						for j := len(kv.Value.Raw) - 1; j >= 0; j-- {
							v = v<<8 | uint64(kv.Value.Raw[j])
						}
						offs = append(offs, v)
					}
				}
				next = m.Offset + 1
			}
			r.Release()
		}
		for i, o := range offs {
			if o != uint64(i) {
				t.Fatalf("Iggy partition %d: message %d holds Kafka offset %d (duplicated or lost records); %d messages", p, i, o, len(offs))
			}
		}
		if len(offs) != per {
			t.Fatalf("Iggy partition %d holds %d records, want %d", p, len(offs), per)
		}
	}
}

// kafkaRoundTrip runs Kafka → Iggy → Kafka: the source in one ferry process, the sink in
// another, each SIGKILLed size.kills times at seeded random moments while a writer fills
// the Kafka topic, the broker restarted once; then Iggy holds every record once and the
// out topic, read read_committed by kafka-python, every record once with its key, headers
// and order.
func kafkaRoundTrip(t *testing.T, size kafkaRun) {
	b := kafkatest.Connect(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 38))
	in, out := kafkatest.Name(t, "in"), kafkatest.Name(t, "out")
	b.CreateTopic(t, in, kafkaPartitions)
	b.CreateTopic(t, out, kafkaPartitions)
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	ctx := context.Background()
	ctxT, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := c.CreateStream(ctxT, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctxT, iggy.Name("s"), "k", kafkaPartitions); err != nil {
		t.Fatal(err)
	}
	cancel()
	srcDir, sinkDir := filepath.Join(dir, "src"), filepath.Join(dir, "sink")
	writeFile(t, filepath.Join(srcDir, "kin.toml"), kafkaSourceFile("kin", b.Bootstrap, in, kafkatest.Name(t, "g")))
	writeFile(t, filepath.Join(sinkDir, "kout.toml"), kafkaSinkFile("kout", b.Bootstrap, out))
	srcArgs := []string{"run", "--config", remoteConfig(t, filepath.Join(dir, "a"), addr, srcDir), "--progress", "0"}
	sinkArgs := []string{"run", "--config", remoteConfig(t, filepath.Join(dir, "b"), addr, sinkDir), "--progress", "0"}
	src := startFerry(t, "source 0", dir, nil, srcArgs...)
	sink := startFerry(t, "sink 0", dir, nil, sinkArgs...)

	var wg sync.WaitGroup
	var writeErr error
	// The write is spread over the kills: before kill k, k+1 shares of it at most.
	var killed atomic.Int64
	var progress writerProgress
	wg.Go(func() {
		writeErr = kafkaWriter(ctx, b, in, size.perPartition, func(n int) int {
			return int((killed.Load() + 1) * int64(n) / int64(size.kills+1))
		}, &progress)
	})
	total := uint64(kafkaPartitions * size.perPartition)
	share := total / uint64(size.kills+1)
	outCount := func() uint64 {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ends, err := b.Admin.ListEndOffsets(ctx, out)
		if err != nil {
			return 0
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return uint64(n)
	}
	var runs []*proc
	restartAt := max(size.kills/2, 1)
	for i := 1; i <= size.kills; i++ {
		// The source's kill: once it sent its share since the last one.
		before := topicMessages(c, "k")
		testkit.WaitFor(t, fmt.Sprintf("source %d sending", i-1), func() bool {
			if src.exited() {
				t.Fatalf("source %d exited by itself: %v\n%s", i-1, src.err, tail(src.out.String(), 30))
			}
			n := topicMessages(c, "k")
			return n > before+share/2 || n >= total || progress.caughtUp(n)
		})
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		src.kill()
		killed.Add(1)
		runs = append(runs, src)
		src = startFerry(t, fmt.Sprintf("source %d", i), dir, nil, srcArgs...)
		// The sink's kill: once it wrote more since its last one.
		beforeOut := outCount()
		testkit.WaitFor(t, fmt.Sprintf("sink %d writing", i-1), func() bool {
			if sink.exited() {
				t.Fatalf("sink %d exited by itself: %v\n%s", i-1, sink.err, tail(sink.out.String(), 30))
			}
			n, out := topicMessages(c, "k"), outCount()
			// out's end offsets count the records and the transactions' own records: at n or
			// more while the writer waits, the sink holds all there is to write.
			return out > beforeOut+share/4 || n >= total || (progress.caughtUp(n) && out >= n)
		})
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		sink.kill()
		runs = append(runs, sink)
		if i == restartAt {
			b.Restart(t)
			t.Logf("broker restarted after kill %d", i)
		}
		sink = startFerry(t, fmt.Sprintf("sink %d", i), dir, nil, sinkArgs...)
		t.Logf("kill %d: %d messages in Iggy, out end offsets %d", i, topicMessages(c, "k"), outCount())
	}
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	testkit.WaitFor(t, "every record in Iggy", func() bool {
		if src.exited() {
			t.Fatalf("last source exited: %v\n%s", src.err, tail(src.out.String(), 30))
		}
		return topicMessages(c, "k") >= total
	})
	// Each record and one offsets record per transaction: out's end offsets pass total
	// once everything is written; then the group's offsets show the sink caught up.
	testkit.WaitFor(t, "the sink caught up", func() bool {
		if sink.exited() {
			t.Fatalf("last sink exited: %v\n%s", sink.err, tail(sink.out.String(), 30))
		}
		offs, err := offsets(t, addr, "s", "k", "iggy-connect-sink-kout")
		if err != nil {
			return false
		}
		for p := range uint32(kafkaPartitions) {
			if po, ok := offs[p]; !ok || po.stored+1 < int64(size.perPartition) {
				return false
			}
		}
		return true
	})
	src.stop(15 * time.Second)
	sink.stop(15 * time.Second)
	judgeIggy(t, c, size.perPartition)
	judgeKafkaOut(t, b, out, size.perPartition)
	heldBack := 0
	for _, r := range append(runs, src, sink) {
		heldBack += strings.Count(r.out.String(), "Iggy holds records past the group's committed offset")
	}
	t.Logf("%d records, %d kills of each process, 1 broker restart: Iggy and out hold each once; %d partitions read back past the committed offset",
		total, size.kills, heldBack)
}

// TestKafkaRoundTripExactlyOnceUnderSIGKILL: CI's size; FERRY_KAFKA_SOAK=1 runs 3
// partitions × 30,000 records with 10 kills of each process.
func TestKafkaRoundTripExactlyOnceUnderSIGKILL(t *testing.T) {
	size := kafkaSmall
	if v, _ := strconv.ParseBool(os.Getenv("FERRY_KAFKA_SOAK")); v {
		size = kafkaSoak
	}
	kafkaRoundTrip(t, size)
}

// TestKafkaTwoProcessesOneKilled: two ferry processes run the same source and sink files
// (one Kafka consumer group, one Iggy consumer group, each shared by both); once both
// carry records, one is SIGKILLed and the other takes its partitions in both groups:
// every record once in Iggy and in the out topic.
func TestKafkaTwoProcessesOneKilled(t *testing.T) {
	b := kafkatest.Connect(t)
	const per = 1500
	in, out := kafkatest.Name(t, "in"), kafkatest.Name(t, "out")
	b.CreateTopic(t, in, kafkaPartitions)
	b.CreateTopic(t, out, kafkaPartitions)
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	ctx := context.Background()
	ctxT, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := c.CreateStream(ctxT, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctxT, iggy.Name("s"), "k", kafkaPartitions); err != nil {
		t.Fatal(err)
	}
	cancel()
	conns := filepath.Join(dir, "conns")
	writeFile(t, filepath.Join(conns, "kin.toml"), kafkaSourceFile("kin", b.Bootstrap, in, kafkatest.Name(t, "g")))
	writeFile(t, filepath.Join(conns, "kout.toml"), kafkaSinkFile("kout", b.Bootstrap, out))
	a := startFerry(t, "a", dir, nil, "run", "--config", remoteConfig(t, filepath.Join(dir, "a"), addr, conns), "--progress", "0")
	bp := startFerry(t, "b", dir, nil, "run", "--config", remoteConfig(t, filepath.Join(dir, "b"), addr, conns), "--progress", "0")
	var killed atomic.Int64
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		writeErr = kafkaWriter(ctx, b, in, per, func(n int) int { return int((killed.Load() + 1) * int64(n) / 2) }, nil)
	})
	total := uint64(kafkaPartitions * per)
	testkit.WaitFor(t, "both processes carrying records", func() bool {
		if a.exited() || bp.exited() {
			t.Fatalf("a process exited: %v %v\n%s\n%s", a.err, bp.err, tail(a.out.String(), 20), tail(bp.out.String(), 20))
		}
		return topicMessages(c, "k") > total/4 && strings.Contains(a.out.String(), "partitions assigned") && strings.Contains(bp.out.String(), "partitions assigned")
	})
	a.kill()
	killed.Add(1)
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	testkit.WaitFor(t, "every record in Iggy and the sink caught up", func() bool {
		if bp.exited() {
			t.Fatalf("b exited: %v\n%s", bp.err, tail(bp.out.String(), 30))
		}
		if topicMessages(c, "k") < total {
			return false
		}
		offs, err := offsets(t, addr, "s", "k", "iggy-connect-sink-kout")
		if err != nil {
			return false
		}
		for p := range uint32(kafkaPartitions) {
			if po, ok := offs[p]; !ok || po.stored+1 < per {
				return false
			}
		}
		return true
	})
	bp.stop(15 * time.Second)
	judgeIggy(t, c, per)
	judgeKafkaOut(t, b, out, per)
}

// TestKafkaBrokerDownAtStart: a source and a sink started while the broker is down say so,
// naming bootstrap_servers, keep retrying, and carry every record once when it is back.
func TestKafkaBrokerDownAtStart(t *testing.T) {
	b := kafkatest.Connect(t)
	const per = 300
	in, out := kafkatest.Name(t, "in"), kafkatest.Name(t, "out")
	b.CreateTopic(t, in, kafkaPartitions)
	b.CreateTopic(t, out, kafkaPartitions)
	if err := kafkaWriter(context.Background(), b, in, per, func(n int) int { return n }, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	ctxT, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := c.CreateStream(ctxT, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctxT, iggy.Name("s"), "k", kafkaPartitions); err != nil {
		t.Fatal(err)
	}
	cancel()
	conns := filepath.Join(dir, "conns")
	writeFile(t, filepath.Join(conns, "kin.toml"), kafkaSourceFile("kin", b.Bootstrap, in, kafkatest.Name(t, "g")))
	writeFile(t, filepath.Join(conns, "kout.toml"), kafkaSinkFile("kout", b.Bootstrap, out))
	var run *proc
	b.Outage(t, func() {
		run = startFerry(t, "run", dir, nil, "run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0")
		for _, want := range []string{"kafka source kin: no broker of bootstrap_servers " + b.Bootstrap + " answers",
			"kafka sink kout: no broker of bootstrap_servers " + b.Bootstrap + " answers"} {
			testkit.WaitFor(t, "the error naming the cluster: "+want, func() bool {
				if run.exited() {
					t.Fatalf("ferry exited with the broker down: %v\n%s", run.err, tail(run.out.String(), 30))
				}
				return strings.Contains(run.out.String(), want)
			})
		}
	})
	total := uint64(kafkaPartitions * per)
	testkit.WaitFor(t, "every record in Iggy and the sink caught up once the broker is back", func() bool {
		if run.exited() {
			t.Fatalf("ferry exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		if topicMessages(c, "k") < total {
			return false
		}
		offs, err := offsets(t, addr, "s", "k", "iggy-connect-sink-kout")
		if err != nil {
			return false
		}
		for p := range uint32(kafkaPartitions) {
			if po, ok := offs[p]; !ok || po.stored+1 < per {
				return false
			}
		}
		return true
	})
	run.stop(15 * time.Second)
	judgeIggy(t, c, per)
	judgeKafkaOut(t, b, out, per)
}
