package mongodb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferryio/ferry/sdk"
)

// documentID is a message's _id: upstream's "stream:topic:partition:message_id" (the id as
// a decimal u128), or, for a message whose id is 0, "stream:topic:partition:offset-N": with
// upstream's scheme every such message of a partition would get one _id, and all but the
// first would be taken as written already. "offset-N" is no decimal, so it never meets a
// message id. A partition purged and produced again reuses offsets: a message of id 0 at
// an offset written before the purge is then taken as written (see docs/mongodb.md).
func documentID(topic sdk.TopicMetadata, partition uint32, m *sdk.ConsumedMessage) string {
	b := make([]byte, 0, len(topic.Stream)+len(topic.Topic)+48)
	b = append(b, topic.Stream...)
	b = append(b, ':')
	b = append(b, topic.Topic...)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(partition), 10)
	b = append(b, ':')
	if m.ID.IsZero() {
		b = append(b, "offset-"...)
		return string(strconv.AppendUint(b, m.Offset, 10))
	}
	return string(appendID(b, m.ID))
}

// appendID appends id's numeric value in decimal, as upstream formats its u128.
func appendID(b []byte, id sdk.MessageID) []byte {
	lo, hi := id.Halves()
	if hi == 0 {
		return strconv.AppendUint(b, lo, 10)
	}
	v := new(big.Int).SetUint64(hi)
	v.Lsh(v, 64)
	v.Or(v, new(big.Int).SetUint64(lo))
	return v.Append(b, 10)
}

// builder makes a message's document as upstream lays it out: _id, the metadata fields,
// then payload.
type builder struct {
	metadata, checksum, origin bool
	format                     PayloadFormat
}

func newBuilder(c config) builder {
	return builder{metadata: c.Metadata, checksum: c.Checksum, origin: c.OriginTime, format: c.Format}
}

// document returns m's document, or why its payload cannot be stored in the configured
// format (a message-level refusal: on_failure decides for it alone).
func (b builder) document(topic sdk.TopicMetadata, partition uint32, m *sdk.ConsumedMessage) (bson.D, error) {
	d := make(bson.D, 0, 9)
	d = append(d, bson.E{Key: "_id", Value: documentID(topic, partition, m)})
	if b.metadata {
		if m.Offset <= math.MaxInt64 {
			d = append(d, bson.E{Key: "iggy_offset", Value: int64(m.Offset)})
		} else {
			d = append(d, bson.E{Key: "iggy_offset_str", Value: strconv.FormatUint(m.Offset, 10)})
		}
		d = append(d,
			bson.E{Key: "iggy_timestamp", Value: dateTime(m.Timestamp)},
			bson.E{Key: "iggy_stream", Value: topic.Stream},
			bson.E{Key: "iggy_topic", Value: topic.Topic})
		if partition <= math.MaxInt32 {
			d = append(d, bson.E{Key: "iggy_partition_id", Value: int32(partition)})
		} else {
			d = append(d, bson.E{Key: "iggy_partition_id", Value: int64(partition)})
		}
	}
	if b.checksum {
		if m.Checksum <= math.MaxInt64 {
			d = append(d, bson.E{Key: "iggy_checksum", Value: int64(m.Checksum)})
		} else {
			d = append(d, bson.E{Key: "iggy_checksum", Value: strconv.FormatUint(m.Checksum, 10)})
		}
	}
	if b.origin {
		d = append(d, bson.E{Key: "iggy_origin_timestamp", Value: dateTime(m.OriginTimestamp)})
	}
	switch b.format {
	case FormatJSON:
		v, err := jsonToBSON(m.Payload)
		if err != nil {
			return nil, fmt.Errorf("payload_format = \"json\": the payload is not JSON MongoDB can store: %w", err)
		}
		d = append(d, bson.E{Key: "payload", Value: v})
	case FormatString:
		if !utf8.Valid(m.Payload) {
			return nil, errors.New("payload_format = \"string\": the payload is not valid UTF-8")
		}
		d = append(d, bson.E{Key: "payload", Value: string(m.Payload)})
	default:
		d = append(d, bson.E{Key: "payload", Value: bson.Binary{Subtype: 0, Data: bytes.Clone(m.Payload)}})
	}
	return d, nil
}

// dateTime is a BSON date from Iggy's µs, truncated to ms as upstream does.
func dateTime(us uint64) bson.DateTime {
	ms := us / 1000
	if ms > math.MaxInt64 {
		ms = math.MaxInt64
	}
	return bson.DateTime(int64(ms))
}

// jsonToBSON converts one JSON value to the BSON value upstream stores: objects as
// documents (keys in their order), arrays, strings, booleans, null, integers as int64
// and other numbers as doubles. An integer beyond int64 is refused (upstream refuses it
// too), as is anything after the value.
func jsonToBSON(payload []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// maxDepth bounds nesting: MongoDB refuses documents nested deeper than 100 levels.
const maxDepth = 100

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
		}
		if t == '{' {
			doc := bson.D{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				doc = append(doc, bson.E{Key: kt.(string), Value: v})
			}
			_, err := dec.Token() // '}'
			return doc, err
		}
		arr := bson.A{}
		for dec.More() {
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ']'
		return arr, err
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return i, nil
		}
		if isInteger(string(t)) {
			return nil, fmt.Errorf("integer %s does not fit in 64 bits", t)
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", t, err)
		}
		return f, nil
	case string, bool, nil:
		return t, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

func isInteger(s string) bool {
	for i, c := range s {
		if c == '-' && i == 0 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
