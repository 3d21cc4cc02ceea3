package wire

import (
	"encoding/binary"
	"strconv"
)

// IDKind is the kind byte of an Identifier.
type IDKind uint8

// Identifier kinds.
const (
	IDNumeric IDKind = 1
	IDString  IDKind = 2
)

// Identifier names a stream, topic, consumer group, consumer or user:
// [kind u8][len u8][value]. Numeric ids are the server-assigned 0-based ids; string ids
// match names exactly.
type Identifier struct {
	Kind IDKind
	Num  uint32 // Kind == IDNumeric
	Name string // Kind == IDString, 1..255 bytes of UTF-8
}

// NumericID returns the numeric identifier id.
func NumericID(id uint32) Identifier { return Identifier{Kind: IDNumeric, Num: id} }

// NamedID returns the string identifier name.
func NamedID(name string) Identifier { return Identifier{Kind: IDString, Name: name} }

// String returns a readable name.
func (id Identifier) String() string {
	if id.Kind == IDNumeric {
		return strconv.FormatUint(uint64(id.Num), 10)
	}
	return strconv.Quote(id.Name)
}

// AppendIdentifier appends id. A string id must satisfy [CheckName].
func AppendIdentifier(dst []byte, id Identifier) []byte {
	if id.Kind == IDNumeric {
		dst = append(dst, byte(IDNumeric), 4)
		return binary.LittleEndian.AppendUint32(dst, id.Num)
	}
	dst = append(dst, byte(id.Kind))
	return AppendName(dst, id.Name)
}

// Identifier reads an Identifier; other kinds, a numeric length ≠ 4 and an empty or
// non-UTF-8 string fail.
func (r *Reader) Identifier() Identifier {
	switch k := IDKind(r.U8()); k {
	case IDNumeric:
		if n := r.U8(); n != 4 && r.err == nil {
			r.Failf("numeric identifier length %d", n)
		}
		return Identifier{Kind: IDNumeric, Num: r.U32()}
	case IDString:
		return Identifier{Kind: IDString, Name: r.Name()}
	default:
		r.Failf("identifier kind %d", k)
		return Identifier{}
	}
}

// ConsumerKind is the kind byte of a Consumer.
type ConsumerKind uint8

// Consumer kinds.
const (
	ConsumerSingle ConsumerKind = 1 // a standalone consumer
	ConsumerGroup  ConsumerKind = 2 // a consumer group
)

// Consumer is [kind u8][Identifier].
type Consumer struct {
	Kind ConsumerKind
	ID   Identifier
}

// AppendConsumer appends c.
func AppendConsumer(dst []byte, c Consumer) []byte {
	return AppendIdentifier(append(dst, byte(c.Kind)), c.ID)
}

// Consumer reads a Consumer; kinds other than 1 and 2 fail.
func (r *Reader) Consumer() Consumer {
	k := ConsumerKind(r.U8())
	if r.err == nil && k != ConsumerSingle && k != ConsumerGroup {
		r.Failf("consumer kind %d", k)
	}
	return Consumer{Kind: k, ID: r.Identifier()}
}

// OptionalPartition is the fixed 5-byte [flag u8][partition_id u32].
type OptionalPartition struct {
	Set bool
	ID  uint32
}

// PartitionID returns a present optional partition.
func PartitionID(id uint32) OptionalPartition { return OptionalPartition{Set: true, ID: id} }

// AppendOptionalPartition appends p; an absent partition is written as 5 zero bytes.
func AppendOptionalPartition(dst []byte, p OptionalPartition) []byte {
	if !p.Set {
		return append(dst, 0, 0, 0, 0, 0)
	}
	return binary.LittleEndian.AppendUint32(append(dst, 1), p.ID)
}

// OptionalPartition reads 5 bytes; any flag other than 1 means absent (ID is then 0).
func (r *Reader) OptionalPartition() OptionalPartition {
	flag, id := r.U8(), r.U32()
	if flag != 1 {
		return OptionalPartition{}
	}
	return OptionalPartition{Set: true, ID: id}
}

// PartitioningKind is the kind byte of a Partitioning.
type PartitioningKind uint8

// Partitioning kinds.
const (
	PartitioningBalanced    PartitioningKind = 1
	PartitioningPartitionID PartitioningKind = 2
	PartitioningMessagesKey PartitioningKind = 3
)

// Partitioning says where SendMessages puts a batch: [kind u8][len u8][value].
type Partitioning struct {
	Kind        PartitioningKind
	PartitionID uint32 // Kind == PartitioningPartitionID
	Key         []byte // Kind == PartitioningMessagesKey, 1..255 bytes
}

// Balanced returns round-robin partitioning (chosen by the server).
func Balanced() Partitioning { return Partitioning{Kind: PartitioningBalanced} }

// ToPartition returns partitioning to an explicit partition id.
func ToPartition(id uint32) Partitioning {
	return Partitioning{Kind: PartitioningPartitionID, PartitionID: id}
}

// ByKey returns partitioning by message key: partition index = XXH32(key, 0) % count.
func ByKey(key []byte) Partitioning { return Partitioning{Kind: PartitioningMessagesKey, Key: key} }

// PartitionForKey returns the partition index a key maps to among count partitions
// (count must be > 0).
func PartitionForKey(key []byte, count uint32) uint32 { return XXH32(key, 0) % count }

// AppendPartitioning appends p.
func AppendPartitioning(dst []byte, p Partitioning) []byte {
	switch p.Kind {
	case PartitioningPartitionID:
		return binary.LittleEndian.AppendUint32(append(dst, byte(p.Kind), 4), p.PartitionID)
	case PartitioningMessagesKey:
		return append(append(dst, byte(p.Kind), byte(len(p.Key))), p.Key...)
	default:
		return append(dst, byte(p.Kind), 0)
	}
}

// Partitioning reads a Partitioning. The key is copied.
func (r *Reader) Partitioning() Partitioning {
	k, n := PartitioningKind(r.U8()), int(r.U8())
	if r.err != nil {
		return Partitioning{}
	}
	switch {
	case k == PartitioningBalanced && n == 0:
		return Partitioning{Kind: k}
	case k == PartitioningPartitionID && n == 4:
		return Partitioning{Kind: k, PartitionID: r.U32()}
	case k == PartitioningMessagesKey && n >= 1:
		return Partitioning{Kind: k, Key: append([]byte(nil), r.Bytes(n)...)}
	}
	r.Failf("partitioning kind %d with length %d", k, n)
	return Partitioning{}
}

// PollingKind is the kind byte of a PollingStrategy.
type PollingKind uint8

// Polling strategy kinds.
const (
	PollingOffset    PollingKind = 1
	PollingTimestamp PollingKind = 2
	PollingFirst     PollingKind = 3
	PollingLast      PollingKind = 4
	PollingNext      PollingKind = 5
)

// PollingStrategy is [kind u8][value u64] (9 bytes).
type PollingStrategy struct {
	Kind  PollingKind
	Value uint64 // offset (Offset) or µs (Timestamp); 0 otherwise
}

// PollOffset starts at offset.
func PollOffset(offset uint64) PollingStrategy { return PollingStrategy{PollingOffset, offset} }

// PollTimestamp starts at the first batch appended at or after µs.
func PollTimestamp(us uint64) PollingStrategy { return PollingStrategy{PollingTimestamp, us} }

// PollFirst starts at the first message.
func PollFirst() PollingStrategy { return PollingStrategy{Kind: PollingFirst} }

// PollLast returns the last count messages.
func PollLast() PollingStrategy { return PollingStrategy{Kind: PollingLast} }

// PollNext starts after the consumer's stored offset (0 if none is stored).
func PollNext() PollingStrategy { return PollingStrategy{Kind: PollingNext} }

// AppendPollingStrategy appends s.
func AppendPollingStrategy(dst []byte, s PollingStrategy) []byte {
	return binary.LittleEndian.AppendUint64(append(dst, byte(s.Kind)), s.Value)
}

// PollingStrategy reads a strategy; kinds outside 1..5 fail.
func (r *Reader) PollingStrategy() PollingStrategy {
	k, v := PollingKind(r.U8()), r.U64()
	if r.err == nil && (k < PollingOffset || k > PollingNext) {
		r.Failf("polling strategy kind %d", k)
	}
	return PollingStrategy{Kind: k, Value: v}
}

// AckLevel is the acknowledgement byte of Store/DeleteConsumerOffset.
type AckLevel uint8

// Ack levels. A single node treats them alike.
const (
	AckNone   AckLevel = 0
	AckQuorum AckLevel = 1 // SDK default
)

// AckLevel reads an ack level; values other than 0 and 1 fail.
func (r *Reader) AckLevel() AckLevel {
	a := AckLevel(r.U8())
	if r.err == nil && a > AckQuorum {
		r.Failf("ack level %d", a)
	}
	return a
}
