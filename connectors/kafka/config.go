package kafka

import (
	"fmt"
	"strings"
	"time"

	"github.com/ferryio/ferry/connectors/kafka/internal/kclient"
	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:kafka".
const Name = "kafka"

// Partitioning is how messages are spread over the Kafka topic's partitions.
type Partitioning string

// The partitionings.
const (
	PartitionSame Partitioning = "same" // Iggy partition n → Kafka partition n (modulo the Kafka partitions)
	PartitionKey  Partitioning = "key"  // Kafka's own partitioner by the record key (murmur2, as Java clients); no key: as same
	PartitionHash Partitioning = "hash" // a hash of the Iggy message id: even spread, the same partition on every retry
)

// Compression is the codec of the produced batches.
type Compression string

// The codecs.
const (
	CompressZstd   Compression = "zstd"
	CompressLZ4    Compression = "lz4"
	CompressSnappy Compression = "snappy"
	CompressGzip   Compression = "gzip"
	CompressNone   Compression = "none"
)

// DefaultDropHeaders are the Iggy headers not copied to Kafka unless drop_headers says
// otherwise: the Kafka source's record of where a message came from, which would describe
// another record than the one written.
var DefaultDropHeaders = []string{"kafka_topic", "kafka_partition", "kafka_offset", "kafka_key"}

type config struct {
	kclient.Conn
	Topic            string
	KeyFrom          string
	Partitioning     Partitioning
	Compression      Compression
	OffsetsTopic     string
	DropHeaders      []string
	TxnTimeout       time.Duration
	MaxBufferedBytes sdk.ByteSize
	Linger           time.Duration
}

// Config declares the sink's plugin_config.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	kclient.Declare(f, &c.Conn)
	f.String("topic", &c.Topic).Default("{topic}").NonEmpty().Check(func(v string) error {
		_, err := parseTemplate(v)
		return err
	}).Doc("the Kafka topic: a template of {stream}, {topic} and {header:NAME} (an Iggy header's value)")
	f.String("key_from", &c.KeyFrom).Default("id").Check(checkKeyFrom).
		Doc("the record key: id (the Iggy message id, 32 hex digits), header:NAME (an Iggy header's value; none when absent) or none")
	sdk.Enum(f, "partitioning", &c.Partitioning, sdk.Choice(PartitionSame), sdk.Choice(PartitionKey), sdk.Choice(PartitionHash)).
		Default(PartitionSame).Doc("same: Iggy partition n → Kafka partition n (modulo); key: by the record key as Kafka's Java clients; hash: by the message id")
	sdk.Enum(f, "compression", &c.Compression, sdk.Choice(CompressZstd), sdk.Choice(CompressLZ4), sdk.Choice(CompressSnappy),
		sdk.Choice(CompressGzip), sdk.Choice(CompressNone)).Default(CompressZstd).Doc("the batches' codec")
	f.String("offsets_topic", &c.OffsetsTopic).Default("ferry-offsets").NonEmpty().
		Doc("the compacted topic the sink keeps its positions in, one record per Iggy partition written in each transaction (created when missing)")
	f.Strings("drop_headers", &c.DropHeaders).Default(DefaultDropHeaders).
		Doc("Iggy headers not copied to the Kafka record (default: the Kafka source's kafka_topic, kafka_partition, kafka_offset, kafka_key)")
	f.Duration("transaction_timeout", &c.TxnTimeout).Default(time.Minute).Min(time.Second).Max(15 * time.Minute).
		Doc("how long the broker lets a transaction stay open before aborting it (a sink that died mid-transaction)")
	f.Size("max_buffered_bytes", &c.MaxBufferedBytes).Default(64 * sdk.MiB).Min(sdk.MiB).
		Doc("bytes of records one partition's producer buffers before Consume waits (the memory bound)")
	f.Duration("linger", &c.Linger).Default(0).Max(time.Second).
		Doc("how long the producer waits to fill a batch (0: the transaction's flush sends at once)")
	f.CommitModes("sink_controlled")
	f.Commits(sdk.CommitsEachBatch) // once the batch's transaction committed
})

// Spec is the sink's plugin_config for the registry.
var Spec = Config.Spec()

func checkKeyFrom(v string) error {
	switch {
	case v == "id", v == "none":
		return nil
	case strings.HasPrefix(v, "header:") && len(v) > len("header:"):
		return nil
	}
	return fmt.Errorf("%q: want id, none or header:NAME", v)
}

// segment is one piece of a topic template: text, or a value to fill in.
type segment struct {
	text   string
	kind   byte // 0 text, 's' stream, 't' topic, 'h' header
	header string
}

// parseTemplate reads a topic template: text with {stream}, {topic} and {header:NAME}.
func parseTemplate(s string) ([]segment, error) {
	var out []segment
	for s != "" {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			out = append(out, segment{text: s})
			break
		}
		if i > 0 {
			out = append(out, segment{text: s[:i]})
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("%q: a { without its }", s)
		}
		name := s[i+1 : i+j]
		switch {
		case name == "stream":
			out = append(out, segment{kind: 's'})
		case name == "topic":
			out = append(out, segment{kind: 't'})
		case strings.HasPrefix(name, "header:") && len(name) > len("header:"):
			out = append(out, segment{kind: 'h', header: strings.TrimPrefix(name, "header:")})
		default:
			return nil, fmt.Errorf("unknown placeholder {%s} (want {stream}, {topic} or {header:NAME})", name)
		}
		s = s[i+j+1:]
	}
	return out, nil
}
