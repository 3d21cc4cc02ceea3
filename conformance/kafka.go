package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafka-soak runs the Kafka sink (builtin:kafka, sink_controlled) into a topic of its own
// while the runtime is SIGKILLed Config.Soak times, and judges from Kafka only: the topic
// is read read_committed (what a consumer sees; records of aborted or unfinished
// transactions are not) and each produced (partition, offset) must be in exactly one
// record. The kills alternate between a random (seeded) moment and a held offset store
// (the storeGate of postgres-soak): the sink committed after its transaction, the gate
// holds the runtime's store, and the kill leaves records in Kafka past the group's stored
// offset, which a sink that trusts Iggy's offset writes again.

// kafkaSoak is one kafka-soak run: the fixture, the client and the topic.
type kafkaSoak struct {
	f     *fixture
	cl    *kgo.Client
	adm   *kadm.Client
	topic string
}

// kafkaValue is the part of a record's value (the produced payload) the judge reads.
type kafkaValue struct {
	P *uint32 `json:"p"`
	N *uint64 `json:"n"`
}

func (s *kafkaSoak) tally(ctx context.Context) (pgTally, error) {
	t, _, err := s.read(ctx)
	return t, err
}

func (s *kafkaSoak) maxWritten(ctx context.Context) (map[uint32]int64, error) {
	_, max, err := s.read(ctx)
	return max, err
}

// read reads the topic read_committed up to its last stable offsets: the tally and the
// highest offset written per partition.
func (s *kafkaSoak) read(ctx context.Context) (pgTally, map[uint32]int64, error) {
	var t pgTally
	max := map[uint32]int64{}
	for q := uint32(0); q < s.f.partitions; q++ {
		max[q] = -1
	}
	ends, err := s.adm.ListCommittedOffsets(ctx, s.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return t, nil, fmt.Errorf("kafka: stable offsets of %s: %w", s.topic, err)
	}
	want := map[int32]int64{}
	from := map[string]map[int32]kgo.Offset{s.topic: {}}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			from[s.topic][o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	seen := map[pkey]int{}
	if len(want) > 0 {
		// Control records (the transactions' markers) are kept: the one before the stable
		// offset tells the read it is at the end.
		cl, err := kgo.NewClient(append(s.opts(), kgo.ConsumePartitions(from), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))...)
		if err != nil {
			return t, nil, err
		}
		defer cl.Close()
		for len(want) > 0 {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				return t, nil, fmt.Errorf("kafka: read %s: %w", s.topic, err)
			}
			var ferr error
			fs.EachError(func(_ string, p int32, err error) {
				ferr = fmt.Errorf("kafka: read %s partition %d: %w", s.topic, p, err)
			})
			if ferr != nil {
				return t, nil, ferr
			}
			fs.EachRecord(func(r *kgo.Record) {
				if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
					delete(want, r.Partition)
				}
				if r.Attrs.IsControl() {
					return
				}
				t.rows++
				var v kafkaValue
				if json.Unmarshal(r.Value, &v) != nil || v.P == nil || v.N == nil {
					t.corrupt++
					return
				}
				k := pkey{*v.P, *v.N}
				if _, ok := s.f.sent[k]; !ok {
					t.unknown++
					return
				}
				if uint32(r.Partition) != k.p%s.f.partitions {
					t.corrupt++ // partitioning = same: Iggy partition p, Kafka partition p
				}
				seen[k]++
			})
		}
	}
	for k := range seen {
		if int64(k.off) > max[k.p] {
			max[k.p] = int64(k.off)
		}
	}
	for k := range s.f.sent {
		if n := seen[k]; n == 0 {
			t.lost++
		} else {
			t.covered++
			t.duplicated += n - 1
		}
	}
	return t, max, nil
}

func (s *kafkaSoak) opts() []kgo.Opt { return []kgo.Opt{kgo.SeedBrokers(s.f.r.cfg.Kafka...)} }

func runKafkaSoak(ctx context.Context, r *Runner, mode string) Result {
	kills := r.cfg.Soak
	expected := fmt.Sprintf("%d SIGKILLs: lost 0, duplicated 0 (exactly-once into Kafka, read_committed)", kills)
	if len(r.cfg.Kafka) == 0 {
		return unsupported(expected, errors.New("no Kafka broker given (--kafka HOST:PORT)"))
	}
	s := &kafkaSoak{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.cfg.Kafka...))
	if err != nil {
		return broken(expected, err)
	}
	defer cl.Close()
	s.cl, s.adm = cl, kadm.NewClient(cl)
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return broken(expected, err)
	}
	s.topic = "ferry-conformance-" + hex.EncodeToString(b)
	res, err := s.adm.CreateTopic(ctx, 2, 1, nil, s.topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return broken(expected, fmt.Errorf("kafka (--kafka %v): create topic %s: %w", r.cfg.Kafka, s.topic, err))
	}
	r.log.Info("kafka-soak topic", "mode", mode, "topic", s.topic, "kept", r.cfg.Keep)
	if !r.cfg.Keep {
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = s.adm.DeleteTopics(dctx, s.topic, s.topic+".offsets")
		}()
	}
	brokers, _ := json.Marshal(r.cfg.Kafka)
	pc := map[string]string{
		"bootstrap_servers": string(brokers), "topic": strconv.Quote(s.topic), "offsets_topic": strconv.Quote(s.topic + ".offsets"),
		"key_from": `"none"`, "transaction_timeout": `"10s"`,
	}
	f, gate, p, err := r.soakStart(ctx, "kafka-soak", mode, connector{batch: 20, schema: "json", maxRetries: -1, plugin: "builtin:kafka", pluginConfig: pc},
		func(f *fixture) { s.f = f })
	if err != nil {
		return broken(expected, err)
	}
	defer gate.close()
	defer func() { p.kill() }()
	rng := mrand.New(mrand.NewSource(r.cfg.Seed))
	fail := func(err error) Result { return broken(expected, err) }
	err = f.wait(ctx, "the Kafka sink's first record", func() bool {
		t, err := s.tally(ctx)
		return p.exited() || (err == nil && t.rows > 0)
	})
	if err == nil && p.exited() {
		err = fmt.Errorf("before the Kafka sink wrote a record: %w", exitError(p))
	}
	if err != nil {
		return unsupported(expected, fmt.Errorf("%w; runtime log: %s", err, oneLine(p.tail(5))))
	}
	var held, ahead, noStore int
	if p, held, ahead, noStore, err = alternateKills(ctx, f, s, p, gate, rng, kills); err != nil {
		return fail(err)
	}
	how := fmt.Sprintf("%d at held offset stores (%d with records past the stored offset), %d at random moments", held, ahead, kills-held)
	return soakFinish(ctx, expected, f, s, p, kills, noStore, how)
}
