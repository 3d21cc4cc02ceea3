package sdk

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Schema says how a message payload is encoded. The string values are the ones Iggy's
// connector configuration files use.
type Schema string

// Schemas known to Iggy connectors.
const (
	SchemaJSON       Schema = "json"
	SchemaRaw        Schema = "raw"
	SchemaText       Schema = "text"
	SchemaProto      Schema = "proto"
	SchemaFlatBuffer Schema = "flat_buffer"
	SchemaAvro       Schema = "avro"
)

// ParseSchema returns the schema named s, or an error naming the accepted values.
func ParseSchema(s string) (Schema, error) {
	switch Schema(s) {
	case SchemaJSON, SchemaRaw, SchemaText, SchemaProto, SchemaFlatBuffer, SchemaAvro:
		return Schema(s), nil
	case "flatbuffer":
		return SchemaFlatBuffer, nil
	}
	return "", fmt.Errorf("unknown schema %q (want json, raw, text, proto, flat_buffer or avro)", s)
}

// MessageID is Iggy's 128-bit message id, stored little-endian as on the wire.
type MessageID [16]byte

// MessageIDFromUint64 returns the id whose numeric value is v.
func MessageIDFromUint64(v uint64) MessageID {
	var id MessageID
	binary.LittleEndian.PutUint64(id[:8], v)
	return id
}

// Halves returns the low and high 64 bits of the id.
func (id MessageID) Halves() (lo, hi uint64) {
	return binary.LittleEndian.Uint64(id[:8]), binary.LittleEndian.Uint64(id[8:])
}

// IsZero reports whether the id is unset.
func (id MessageID) IsZero() bool { return id == MessageID{} }

// String renders the id as 32 hex digits, most significant first.
func (id MessageID) String() string {
	var be [16]byte
	for i := range id {
		be[15-i] = id[i]
	}
	return hex.EncodeToString(be[:])
}

// HeaderKind is the type tag of a user header key or value, numbered as on Iggy's wire.
type HeaderKind uint8

// Header kinds, with Iggy's wire codes.
const (
	HeaderRaw     HeaderKind = 1
	HeaderString  HeaderKind = 2
	HeaderBool    HeaderKind = 3
	HeaderInt8    HeaderKind = 4
	HeaderInt16   HeaderKind = 5
	HeaderInt32   HeaderKind = 6
	HeaderInt64   HeaderKind = 7
	HeaderInt128  HeaderKind = 8
	HeaderUint8   HeaderKind = 9
	HeaderUint16  HeaderKind = 10
	HeaderUint32  HeaderKind = 11
	HeaderUint64  HeaderKind = 12
	HeaderUint128 HeaderKind = 13
	HeaderFloat32 HeaderKind = 14
	HeaderFloat64 HeaderKind = 15
)

// HeaderField is one typed header key or value: a kind and its raw little-endian bytes.
type HeaderField struct {
	Kind  HeaderKind
	Value []byte
}

// String returns a string header field.
func String(s string) HeaderField { return HeaderField{Kind: HeaderString, Value: []byte(s)} }

// Uint64 returns a uint64 header field.
func Uint64(v uint64) HeaderField {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, v)
	return HeaderField{Kind: HeaderUint64, Value: b}
}

// Header is one user header entry. Iggy header keys are typed like values; almost all
// producers use string keys.
type Header struct {
	Key   HeaderField
	Value HeaderField
}

// ConsumedMessage is one message handed to a sink. Byte slices are valid only during the
// Consume call that received them: a sink that keeps them past its return must copy them.
type ConsumedMessage struct {
	ID              MessageID
	Offset          uint64 // the message's offset in its partition
	Checksum        uint64 // XXH3-64 of the message frame, as stored by Iggy
	Timestamp       uint64 // µs since the epoch, set by the server at append
	OriginTimestamp uint64 // µs since the epoch, set by the producer
	Headers         []Header
	Payload         []byte
}

// ProducedMessage is one message a source hands to Ferry for sending to Iggy.
type ProducedMessage struct {
	ID      MessageID // zero: Ferry assigns a random id
	Headers []Header
	Payload []byte
	// PartitionKey, when not empty, picks the message's partition: XXH32(key) modulo the
	// topic's partition count, as Iggy's messages-key partitioning does, so messages with
	// one key keep their order. Empty: the runtime's default (round robin per batch).
	PartitionKey []byte
	// Partition, when not nil, names the message's partition outright, by its index among
	// the topic's partitions as [Tail] numbers them (0 is the first; an index past the
	// last wraps around: index modulo the partition count), and wins over PartitionKey. A
	// source that mirrors an origin partition by partition (Kafka partition n → Iggy
	// partition n) sets it, so that each origin lane goes to one partition whatever its
	// keys.
	Partition *uint32
	// OriginTimestamp is the producer's time in µs since the epoch that Iggy stores with
	// the message (a replica keeps the original's); 0: the time of the send.
	OriginTimestamp uint64
	// Stream and Topic, when not empty, send the message to that Iggy stream or topic
	// instead of the connector's [[streams]] entry's (a source that routes its origin's
	// topics to several Iggy topics); an empty one keeps the entry's. The target must
	// exist (the runtime creates none while it runs): a send to a missing one is refused
	// like an invalid message, and a name over 255 bytes rejects the message alone; either
	// way on_failure decides. Every target takes the entry's schema, transforms and
	// batching; Tail and TailN read only the entry's topic.
	Stream, Topic string
}

// PartitionAt returns a [ProducedMessage.Partition] naming the partition at index i.
func PartitionAt(i uint32) *uint32 { return &i }
