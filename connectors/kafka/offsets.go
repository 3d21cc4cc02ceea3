package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ferryio/ferry/connectors/kafka/internal/kclient"
	"github.com/ferryio/ferry/sdk"
)

// The offsets topic: one record per Iggy partition the sink wrote, in the same transaction
// as the partition's records; compaction keeps the newest per key.
//
//	key   <connector key>/<stream>/<topic>/<partition id>
//	value {"offset":N,"timestamp":T}   N: the last Iggy offset written, T: its server timestamp (µs)
//	      {"offset":null}              the partition went back to 0 (purged): nothing written of it

// stored is one offsets record's value.
type stored struct {
	Offset    *uint64 `json:"offset"`
	Timestamp uint64  `json:"timestamp,omitempty"`
}

func offsetsKey(connector string, t sdk.TopicMetadata, p sdk.Partition) string {
	return connector + "/" + t.Stream + "/" + t.Topic + "/" + strconv.FormatUint(uint64(p.PartitionID), 10)
}

func offsetsValue(last, ts uint64) []byte {
	b, _ := json.Marshal(stored{Offset: &last, Timestamp: ts})
	return b
}

// ensureOffsetsTopic creates the offsets topic, compacted with one partition, unless it
// exists (a topic made by hand is used as it is), and waits until its partitions answer
// (a topic just created takes a moment to be served).
func ensureOffsetsTopic(ctx context.Context, adm *kadm.Client, name string, conn *kclient.Conn, log *slog.Logger) error {
	res, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": new("compact")}, name)
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return kclient.Classify(fmt.Errorf("create the offsets topic %q on %s: %w", name, conn.Where(), err))
	}
	retry := sdk.Retry{Initial: 50 * time.Millisecond, Max: time.Second, Attempts: 30, What: "wait for the offsets topic", Log: log}
	return retry.Do(ctx, func(ctx context.Context, _ int) error {
		ends, err := adm.ListEndOffsets(ctx, name)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return kclient.Classify(fmt.Errorf("the offsets topic %q on %s: %w", name, conn.Where(), err))
		}
		return nil
	})
}

// readOffsets reads the offsets topic read_committed (records of aborted or open
// transactions are not seen) until it has seen, on each partition, the offset upTo names
// (the sink's probe record, committed after every producer of keys was fenced), and
// returns the newest values of keys. Every record of those keys is below the probe, and
// the probe is visible only once every transaction begun before it ended: what is read is
// all there will ever be of them.
func readOffsets(ctx context.Context, base []kgo.Opt, topic string, upTo map[int32]int64, keys map[string]bool) (map[string]stored, error) {
	out := map[string]stored{}
	from := map[string]map[int32]kgo.Offset{topic: {}}
	want := map[int32]int64{}
	for p, o := range upTo {
		from[topic][p] = kgo.NewOffset().AtStart()
		want[p] = o
	}
	opts := append(append([]kgo.Opt{}, base...), kgo.ConsumePartitions(from), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read the offsets topic %q: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			ferr = fmt.Errorf("read the offsets topic %q partition %d: %w", topic, p, err)
		})
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset >= end {
				delete(want, r.Partition)
			}
			if !keys[string(r.Key)] {
				return
			}
			var v stored
			if json.Unmarshal(r.Value, &v) == nil {
				out[string(r.Key)] = v
			}
		})
	}
	return out, nil
}
