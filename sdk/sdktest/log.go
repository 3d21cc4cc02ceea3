package sdktest

import (
	"hash/fnv"
	"sync"

	"github.com/ferryio/ferry/sdk"
)

// Log stands in for a source's Iggy topic: partitions of appended messages, numbered
// from offset 0. A message with a partition key goes to the partition its key hashes to
// (the same for every message of one key, as Iggy's key partitioning); one without goes
// round robin, one partition per batch; one that names its partition
// ([sdk.ProducedMessage.Partition]) goes there (its index modulo the partitions). Safe for
// concurrent use.
type Log struct {
	mu    sync.Mutex
	parts [][]Stored
	next  int // round robin
}

// Stored is one message in a Log.
type Stored struct {
	Partition uint32
	Offset    uint64
	Message   sdk.ProducedMessage
}

// NewLog returns a log of n partitions (ids 0 … n−1).
func NewLog(n int) *Log { return &Log{parts: make([][]Stored, max(n, 1))} }

// Append appends a batch as the runtime's producer would, copying the messages.
func (l *Log) Append(msgs []sdk.ProducedMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rr := l.next % len(l.parts)
	l.next++
	for _, m := range msgs {
		i := rr
		switch {
		case m.Partition != nil:
			i = int(*m.Partition % uint32(len(l.parts)))
		case len(m.PartitionKey) > 0:
			i = l.partitionOf(m.PartitionKey)
		}
		cp := sdk.ProducedMessage{ID: m.ID, Payload: append([]byte(nil), m.Payload...),
			PartitionKey: append([]byte(nil), m.PartitionKey...), Headers: copyHeaders(m.Headers), Partition: m.Partition,
			OriginTimestamp: m.OriginTimestamp}
		l.parts[i] = append(l.parts[i], Stored{Partition: uint32(i), Offset: uint64(len(l.parts[i])), Message: cp})
	}
}

func (l *Log) partitionOf(key []byte) int {
	h := fnv.New32a()
	_, _ = h.Write(key)
	return int(h.Sum32() % uint32(len(l.parts)))
}

// Partition returns partition i's messages, oldest first.
func (l *Log) Partition(i int) []Stored {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Stored(nil), l.parts[i]...)
}

// All returns every message, partition by partition.
func (l *Log) All() []Stored {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Stored
	for _, p := range l.parts {
		out = append(out, p...)
	}
	return out
}

// Len returns how many messages the log holds.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.parts {
		n += len(p)
	}
	return n
}

// Tail is what the runtime's SourceEnv.Tail (n = 1) and TailN read from the log.
func (l *Log) Tail(n int) sdk.Tail {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := sdk.Tail{Last: make([]*sdk.SentMessage, len(l.parts)), PartitionOf: func(key []byte) int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.partitionOf(key)
	}}
	if n > 1 {
		t.Recent = make([][]*sdk.SentMessage, len(l.parts))
	}
	for i, p := range l.parts {
		from := max(len(p)-max(n, 1), 0)
		for _, s := range p[from:] {
			sm := &sdk.SentMessage{Partition: s.Partition, Offset: s.Offset, ID: s.Message.ID, Headers: copyHeaders(s.Message.Headers)}
			t.Last[i] = sm
			if n > 1 {
				t.Recent[i] = append(t.Recent[i], sm)
			}
		}
	}
	return t
}

func copyHeaders(hs []sdk.Header) []sdk.Header {
	out := make([]sdk.Header, len(hs))
	for i, h := range hs {
		out[i] = sdk.Header{Key: sdk.HeaderField{Kind: h.Key.Kind, Value: append([]byte(nil), h.Key.Value...)},
			Value: sdk.HeaderField{Kind: h.Value.Kind, Value: append([]byte(nil), h.Value.Value...)}}
	}
	return out
}
