package postcard

import "github.com/ferryio/ferry/sdk"

// TopicMetadata layout: stream: String, topic: String, then Ferry's extension: stream_id u32,
// topic_id u32. Upstream plugins decode the two names with from_bytes and ignore the
// appended ids; Ferry-aware plugins read them to address the commit callback.

// AppendTopicMetadata appends t in Ferry's extended layout (names, then stream_id, topic_id).
func AppendTopicMetadata(dst []byte, t sdk.TopicMetadata) []byte {
	dst = AppendString(dst, t.Stream)
	dst = AppendString(dst, t.Topic)
	dst = AppendUvarint(dst, uint64(t.StreamID))
	return AppendUvarint(dst, uint64(t.TopicID))
}

// DecodeTopicMetadata decodes a TopicMetadata. extended reports whether Ferry's ids followed
// the names; without them (the upstream layout) StreamID and TopicID are 0. Bytes after the
// ids are ignored.
func DecodeTopicMetadata(b []byte) (t sdk.TopicMetadata, extended bool, err error) {
	r := NewReader(b)
	t.Stream = r.Str()
	t.Topic = r.Str()
	if r.Err() == nil && r.Remaining() > 0 {
		t.StreamID = r.U32()
		t.TopicID = r.U32()
		extended = true
	}
	if r.Err() != nil {
		return sdk.TopicMetadata{}, false, r.Err()
	}
	return t, extended, nil
}

// AppendMessagesMetadata appends m: partition_id u32, current_offset u64, schema. Only
// Partition.PartitionID is encoded (the stream and topic ids travel in TopicMetadata).
func AppendMessagesMetadata(dst []byte, m sdk.MessagesMetadata) ([]byte, error) {
	i, err := SchemaIndex(m.Schema)
	if err != nil {
		return dst, err
	}
	dst = AppendUvarint(dst, uint64(m.Partition.PartitionID))
	dst = AppendUvarint(dst, m.CurrentOffset)
	return AppendUvarint(dst, uint64(i)), nil
}

// DecodeMessagesMetadata decodes a MessagesMetadata; Partition.StreamID and TopicID are 0.
func DecodeMessagesMetadata(b []byte) (sdk.MessagesMetadata, error) {
	r := NewReader(b)
	var m sdk.MessagesMetadata
	m.Partition.PartitionID = r.U32()
	m.CurrentOffset = r.U64()
	m.Schema = r.Schema()
	if r.Err() != nil {
		return sdk.MessagesMetadata{}, r.Err()
	}
	return m, nil
}

// AppendConnectorState appends a ConnectorState (a newtype over Vec<u8>).
func AppendConnectorState(dst, state []byte) []byte { return AppendBytes(dst, state) }

// DecodeConnectorState decodes a ConnectorState and returns a copy of its bytes.
func DecodeConnectorState(b []byte) ([]byte, error) {
	r := NewReader(b)
	s := r.Bytes()
	return s, r.Err()
}
