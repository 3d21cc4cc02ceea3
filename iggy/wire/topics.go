package wire

// Topics.
//   - GetTopic (300, op 2): [stream Id][topic Id] → TopicDetails; empty = not found.
//   - GetTopics (301, op 2): [stream Id] → [count u32] + TopicHeader × count.
//   - CreateTopic (302, op 132): [stream Id][partitions_count u32][name Name][options TLV
//     to end] → TopicDetails (all counters 0). There is no replication_factor in 0.9.
//   - DeleteTopic (303, op 134), PurgeTopic (305, op 135): [stream Id][topic Id] → ∅.
//   - UpdateTopic (304, op 133): [stream Id][topic Id][name Name][options TLV to end] → ∅.

import "encoding/binary"

// Topic option keys (their values are strings, as Iggy defines them).
const (
	OptCompressionAlgorithm         = "compression_algorithm"
	OptMessageExpiry                = "message_expiry"
	OptMaxTopicSize                 = "max_topic_size"
	OptSegmentSize                  = "segment_size"
	OptEnforceFsync                 = "enforce_fsync"
	OptMessagesRequiredToSave       = "messages_required_to_save"
	OptSizeOfMessagesRequiredToSave = "size_of_messages_required_to_save"
	OptPreallocateSegments          = "preallocate_segments"
)

// Special values of TopicHeader fields.
const (
	ExpiryServerDefault uint64 = 0
	ExpiryNever         uint64 = ^uint64(0)
	SizeServerDefault   uint64 = 0
	SizeUnlimited       uint64 = ^uint64(0)
	CompressionNone     uint8  = 1
	CompressionGzip     uint8  = 2
	// MaxPartitionsPerRequest bounds partitions_count of CreateTopic/CreatePartitions.
	MaxPartitionsPerRequest = 1000
)

// GetTopicRequest is code 300.
type GetTopicRequest struct{ Stream, Topic Identifier }

// Code returns CodeGetTopic.
func (GetTopicRequest) Code() Code { return CodeGetTopic }

// Append appends the encoding of the GetTopicRequest to dst.
func (q GetTopicRequest) Append(dst []byte) []byte {
	return AppendIdentifier(AppendIdentifier(dst, q.Stream), q.Topic)
}

// DecodeGetTopicRequest decodes code 300.
func DecodeGetTopicRequest(body []byte) (GetTopicRequest, error) {
	r := NewReader(body)
	q := GetTopicRequest{r.Identifier(), r.Identifier()}
	return q, finish(&r, "GetTopic")
}

// GetTopicsRequest is code 301.
type GetTopicsRequest struct{ Stream Identifier }

// Code returns CodeGetTopics.
func (GetTopicsRequest) Code() Code { return CodeGetTopics }

// Append appends the encoding of the GetTopicsRequest to dst.
func (q GetTopicsRequest) Append(dst []byte) []byte {
	return AppendIdentifier(dst, q.Stream)
}

// DecodeGetTopicsRequest decodes code 301.
func DecodeGetTopicsRequest(body []byte) (GetTopicsRequest, error) {
	r := NewReader(body)
	q := GetTopicsRequest{r.Identifier()}
	return q, finish(&r, "GetTopics")
}

// CreateTopicRequest is code 302. PartitionsCount may be 0..1000.
type CreateTopicRequest struct {
	Stream          Identifier
	PartitionsCount uint32
	Name            string
	Options         []KV
}

// Code returns CodeCreateTopic.
func (CreateTopicRequest) Code() Code { return CodeCreateTopic }

// Append appends the encoding of the CreateTopicRequest to dst.
func (q CreateTopicRequest) Append(dst []byte) []byte {
	dst = AppendIdentifier(dst, q.Stream)
	dst = binary.LittleEndian.AppendUint32(dst, q.PartitionsCount)
	return AppendKVs(AppendName(dst, q.Name), q.Options)
}

// DecodeCreateTopicRequest decodes code 302 (the option values are not interpreted).
func DecodeCreateTopicRequest(body []byte) (CreateTopicRequest, error) {
	r := NewReader(body)
	q := CreateTopicRequest{Stream: r.Identifier(), PartitionsCount: r.U32(), Name: r.Name(), Options: r.tailOptions()}
	return q, finish(&r, "CreateTopic")
}

// DeleteTopicRequest is code 303.
type DeleteTopicRequest struct{ Stream, Topic Identifier }

// Code returns CodeDeleteTopic.
func (DeleteTopicRequest) Code() Code { return CodeDeleteTopic }

// Append appends the encoding of the DeleteTopicRequest to dst.
func (q DeleteTopicRequest) Append(dst []byte) []byte {
	return AppendIdentifier(AppendIdentifier(dst, q.Stream), q.Topic)
}

// DecodeDeleteTopicRequest decodes code 303.
func DecodeDeleteTopicRequest(body []byte) (DeleteTopicRequest, error) {
	r := NewReader(body)
	q := DeleteTopicRequest{r.Identifier(), r.Identifier()}
	return q, finish(&r, "DeleteTopic")
}

// UpdateTopicRequest is code 304. Only compression_algorithm, message_expiry and
// max_topic_size may be sent; absent keys keep their value.
type UpdateTopicRequest struct {
	Stream, Topic Identifier
	Name          string
	Options       []KV
}

// Code returns CodeUpdateTopic.
func (UpdateTopicRequest) Code() Code { return CodeUpdateTopic }

// Append appends the encoding of the UpdateTopicRequest to dst.
func (q UpdateTopicRequest) Append(dst []byte) []byte {
	dst = AppendIdentifier(AppendIdentifier(dst, q.Stream), q.Topic)
	return AppendKVs(AppendName(dst, q.Name), q.Options)
}

// DecodeUpdateTopicRequest decodes code 304.
func DecodeUpdateTopicRequest(body []byte) (UpdateTopicRequest, error) {
	r := NewReader(body)
	q := UpdateTopicRequest{Stream: r.Identifier(), Topic: r.Identifier(), Name: r.Name(), Options: r.tailOptions()}
	return q, finish(&r, "UpdateTopic")
}

// PurgeTopicRequest is code 305.
type PurgeTopicRequest struct{ Stream, Topic Identifier }

// Code returns CodePurgeTopic.
func (PurgeTopicRequest) Code() Code { return CodePurgeTopic }

// Append appends the encoding of the PurgeTopicRequest to dst.
func (q PurgeTopicRequest) Append(dst []byte) []byte {
	return AppendIdentifier(AppendIdentifier(dst, q.Stream), q.Topic)
}

// DecodePurgeTopicRequest decodes code 305.
func DecodePurgeTopicRequest(body []byte) (PurgeTopicRequest, error) {
	r := NewReader(body)
	q := PurgeTopicRequest{r.Identifier(), r.Identifier()}
	return q, finish(&r, "PurgeTopic")
}

// TopicHeader describes one topic: [id u32][created_at u64][partitions_count u32]
// [message_expiry u64][compression u8][max_topic_size u64][size_bytes u64]
// [messages_count u64][name Name][explicit_len u32][explicit TLV][derived_len u32]
// [derived TLV]. Explicit options are those the client sent, derived ones the defaults
// the server filled in.
type TopicHeader struct {
	ID              uint32
	CreatedAt       uint64
	PartitionsCount uint32
	MessageExpiry   uint64 // ExpiryServerDefault, ExpiryNever or µs
	Compression     uint8  // CompressionNone or CompressionGzip
	MaxTopicSize    uint64 // SizeServerDefault, SizeUnlimited or bytes
	SizeBytes       uint64
	MessagesCount   uint64
	Name            string
	ExplicitOptions []KV
	DerivedOptions  []KV
}

// topicHeaderMin is 50 fixed bytes (incl. the name length) + 1 name byte + 8.
const topicHeaderMin = 59

// Append appends the encoding of the TopicHeader to dst.
func (t TopicHeader) Append(dst []byte) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, t.ID)
	dst = le.AppendUint64(dst, t.CreatedAt)
	dst = le.AppendUint32(dst, t.PartitionsCount)
	dst = le.AppendUint64(dst, t.MessageExpiry)
	dst = append(dst, t.Compression)
	dst = le.AppendUint64(dst, t.MaxTopicSize)
	dst = le.AppendUint64(dst, t.SizeBytes)
	dst = le.AppendUint64(dst, t.MessagesCount)
	dst = AppendName(dst, t.Name)
	dst = appendPrefixedOptions(dst, t.ExplicitOptions)
	return appendPrefixedOptions(dst, t.DerivedOptions)
}

func (r *Reader) topicHeader() TopicHeader {
	return TopicHeader{ID: r.U32(), CreatedAt: r.U64(), PartitionsCount: r.U32(), MessageExpiry: r.U64(),
		Compression: r.U8(), MaxTopicSize: r.U64(), SizeBytes: r.U64(), MessagesCount: r.U64(),
		Name: r.Name(), ExplicitOptions: r.prefixedOptions(), DerivedOptions: r.prefixedOptions()}
}

// PartitionResponse is the 40-byte partition entry: [id u32][created_at u64]
// [segments_count u32][current_offset u64][size_bytes u64][messages_count u64].
type PartitionResponse struct {
	ID            uint32
	CreatedAt     uint64
	SegmentsCount uint32
	CurrentOffset uint64 // last offset, 0 when empty (check MessagesCount)
	SizeBytes     uint64
	MessagesCount uint64
}

// Append appends the encoding of the PartitionResponse to dst.
func (p PartitionResponse) Append(dst []byte) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, p.ID)
	dst = le.AppendUint64(dst, p.CreatedAt)
	dst = le.AppendUint32(dst, p.SegmentsCount)
	dst = le.AppendUint64(dst, p.CurrentOffset)
	dst = le.AppendUint64(dst, p.SizeBytes)
	return le.AppendUint64(dst, p.MessagesCount)
}

// TopicDetails is the GetTopic and CreateTopic reply: TopicHeader followed by
// PartitionsCount partition entries. Append writes PartitionsCount = len(Partitions).
type TopicDetails struct {
	TopicHeader
	Partitions []PartitionResponse
}

// Append appends the encoding of the TopicDetails to dst.
func (t TopicDetails) Append(dst []byte) []byte {
	t.PartitionsCount = uint32(len(t.Partitions))
	dst = t.TopicHeader.Append(dst)
	for _, p := range t.Partitions {
		dst = p.Append(dst)
	}
	return dst
}

// DecodeTopicDetails decodes a GetTopic or CreateTopic reply payload; found is false (and
// err nil) for the empty payload that means "no such topic".
func DecodeTopicDetails(p []byte) (t TopicDetails, found bool, err error) {
	if len(p) == 0 {
		return TopicDetails{}, false, nil
	}
	r := NewReader(p)
	t.TopicHeader = r.topicHeader()
	if n := r.boundCount(t.PartitionsCount, 40); n > 0 {
		t.Partitions = make([]PartitionResponse, n)
		for i := range t.Partitions {
			t.Partitions[i] = PartitionResponse{ID: r.U32(), CreatedAt: r.U64(), SegmentsCount: r.U32(),
				CurrentOffset: r.U64(), SizeBytes: r.U64(), MessagesCount: r.U64()}
		}
	}
	return t, true, finish(&r, "TopicDetails")
}

// AppendTopics encodes a GetTopics reply payload: [count u32] + headers.
func AppendTopics(dst []byte, topics []TopicHeader) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(topics)))
	for _, t := range topics {
		dst = t.Append(dst)
	}
	return dst
}

// DecodeTopics decodes a GetTopics reply payload.
func DecodeTopics(p []byte) ([]TopicHeader, error) {
	r := NewReader(p)
	var out []TopicHeader
	if n := r.boundCount(r.U32(), topicHeaderMin); n > 0 {
		out = make([]TopicHeader, n)
		for i := range out {
			out[i] = r.topicHeader()
		}
	}
	return out, finish(&r, "GetTopics reply")
}
