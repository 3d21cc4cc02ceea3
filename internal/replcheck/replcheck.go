// Package replcheck judges an Iggy-to-Iggy replication from the outside: a writer that
// appends to the remote topic through restarts of the remote server, a reader of both
// topics, and their comparison, message for message. The iggy-replication conformance
// scenario and the end-to-end SIGKILL tests share it, so both judge by one rule: each
// local partition n holds exactly the messages of remote partition n, in order, with the
// remote's ids, origin timestamps, payloads and headers, plus the origin headers naming
// the remote stream, topic, partition, offset and the topic's creation time.
//
// It knows the client only (no runtime, no connector): the header names are spelled here
// again, as a user of the replica would spell them.
package replcheck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

// The origin headers of a replica (docs/iggy-replication.md).
const (
	HeaderStream    = "iggy_origin_stream"
	HeaderTopic     = "iggy_origin_topic"
	HeaderPartition = "iggy_origin_partition"
	HeaderOffset    = "iggy_origin_offset"
	HeaderCreatedAt = "iggy_origin_topic_created_at"
)

// Writer appends numbered messages to every partition of the remote topic: message i of
// partition p has payload "p<p>-m<i>" padded to Size bytes, origin timestamp 1e15 + i and
// headers seq = i (uint64) and kind = "w" (string); the client gives each a random id.
// A send that fails is sent again (with new ids) after a pause, until it succeeds or ctx
// ends: a send whose outcome was unknown may leave the batch twice in the remote, which
// the comparison does not mind (the replica must equal whatever the remote holds).
type Writer struct {
	Client        *iggy.Client
	Stream, Topic string
	Partitions    uint32
	Size          int // payload bytes (at least the "p<p>-m<i>" text)
}

// Write appends n messages to each partition, in batches of batch, calling pace (if not
// nil) after each round of batches.
func (w *Writer) Write(ctx context.Context, n, batch int, pace func()) error {
	for from := 0; from < n; from += batch {
		for p := range w.Partitions {
			msgs := make([]iggy.Message, 0, batch)
			for i := from; i < min(from+batch, n); i++ {
				payload := fmt.Appendf(nil, "p%d-m%d", p, i)
				if len(payload) < w.Size {
					payload = append(payload, strings.Repeat(".", w.Size-len(payload))...)
				}
				msgs = append(msgs, iggy.Message{Payload: payload, OriginTimestamp: 1e15 + uint64(i), Headers: []wire.KV{
					{Key: wire.StringValue("seq"), Value: wire.Uint64Value(uint64(i))},
					{Key: wire.StringValue("kind"), Value: wire.StringValue("w")},
				}})
			}
			for {
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := w.Client.SendMessages(sctx, iggy.Name(w.Stream), iggy.Name(w.Topic), wire.ToPartition(p), msgs)
				cancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return fmt.Errorf("write partition %d from %d: %w", p, from, ctx.Err())
				}
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond): // the remote restarting
				}
			}
		}
		if pace != nil {
			pace()
		}
	}
	return nil
}

// Message is one message as read back.
type Message struct {
	Offset          uint64
	ID              wire.Uint128
	OriginTimestamp uint64
	Payload         string
	Headers         []string // "key=value" in wire order (values as text)
}

// Read reads every message of one partition, oldest first.
func Read(ctx context.Context, c *iggy.Client, stream, topic string, partition uint32) ([]Message, error) {
	var out []Message
	for from := uint64(0); ; {
		part := partition
		r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(0)},
			Stream: iggy.Name(stream), Topic: iggy.Name(topic), Partition: &part, Strategy: wire.PollOffset(from), Count: 1000})
		if err != nil {
			return nil, fmt.Errorf("read %s/%s partition %d from %d: %w", stream, topic, partition, from, err)
		}
		if len(r.Messages) == 0 {
			r.Release()
			return out, nil
		}
		for _, m := range r.Messages {
			kvs, err := m.Headers(nil)
			if err != nil {
				r.Release()
				return nil, fmt.Errorf("%s/%s partition %d offset %d: %w", stream, topic, partition, m.Offset, err)
			}
			hs := make([]string, 0, len(kvs))
			for _, kv := range kvs {
				hs = append(hs, string(kv.Key.Raw)+"="+text(kv.Value))
			}
			out = append(out, Message{Offset: m.Offset, ID: m.ID, OriginTimestamp: m.OriginTimestamp, Payload: string(m.Payload), Headers: hs})
			from = m.Offset + 1
		}
		r.Release()
	}
}

func text(v wire.HeaderValue) string {
	switch v.Kind {
	case wire.KindUint32:
		return fmt.Sprint(binary.LittleEndian.Uint32(v.Raw))
	case wire.KindUint64:
		return fmt.Sprint(binary.LittleEndian.Uint64(v.Raw))
	}
	return string(v.Raw)
}

// Compare reads every partition of both topics and returns nil when local partition n is
// remote partition n's replica, or an error naming the first difference per partition.
func Compare(ctx context.Context, remote *iggy.Client, rStream, rTopic string, local *iggy.Client, lStream, lTopic string, partitions uint32) error {
	t, err := remote.GetTopic(ctx, iggy.Name(rStream), iggy.Name(rTopic))
	if err != nil {
		return fmt.Errorf("remote topic: %w", err)
	}
	var errs []error
	for p := range partitions {
		rm, err := Read(ctx, remote, rStream, rTopic, p)
		if err != nil {
			return err
		}
		lm, err := Read(ctx, local, lStream, lTopic, p)
		if err != nil {
			return err
		}
		if err := comparePartition(rm, lm, rStream, rTopic, p, t.CreatedAt); err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

func comparePartition(rm, lm []Message, stream, topic string, p uint32, createdAt uint64) error {
	for i := range min(len(rm), len(lm)) {
		r, l := rm[i], lm[i]
		var want []string
		for _, h := range r.Headers {
			if !strings.HasPrefix(h, "iggy_origin_") {
				want = append(want, h)
			}
		}
		want = append(want, HeaderStream+"="+stream, HeaderTopic+"="+topic, fmt.Sprintf("%s=%d", HeaderPartition, p),
			fmt.Sprintf("%s=%d", HeaderCreatedAt, createdAt), fmt.Sprintf("%s=%d", HeaderOffset, r.Offset))
		switch {
		case l.ID != r.ID:
			return fmt.Errorf("local offset %d has id %v, the remote's offset %d %v (%s vs %s)", l.Offset, l.ID, r.Offset, r.ID, l.Payload, r.Payload)
		case l.Payload != r.Payload:
			return fmt.Errorf("local offset %d payload %q, remote %q", l.Offset, l.Payload, r.Payload)
		case l.OriginTimestamp != r.OriginTimestamp:
			return fmt.Errorf("local offset %d origin timestamp %d, remote %d", l.Offset, l.OriginTimestamp, r.OriginTimestamp)
		case strings.Join(l.Headers, ",") != strings.Join(want, ","):
			return fmt.Errorf("local offset %d headers %v, want %v", l.Offset, l.Headers, want)
		}
	}
	if len(rm) != len(lm) {
		return fmt.Errorf("the remote holds %d messages, the local %d", len(rm), len(lm))
	}
	return nil
}

// Count returns the messages of every partition of a topic (0 when it cannot be read).
func Count(ctx context.Context, c *iggy.Client, stream, topic string) uint64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, err := c.GetTopic(ctx, iggy.Name(stream), iggy.Name(topic))
	if err != nil {
		return 0
	}
	var n uint64
	for _, p := range t.Partitions {
		n += p.MessagesCount
	}
	return n
}
