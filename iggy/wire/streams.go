package wire

// Streams.
//   - GetStream (200, op 2): [stream Id] → StreamDetails; an empty payload means not found.
//   - GetStreams (201, op 2): ∅ → StreamResponse repeated to the end (empty = none).
//   - CreateStream (202, op 128): [name Name][options TLV to end] → StreamResponse.
//     Streams accept no option keys (S:4041 for any).
//   - DeleteStream (203, op 130), PurgeStream (205, op 131): [stream Id] → ∅.
//   - UpdateStream (204, op 129): [stream Id][name Name][options TLV to end] → ∅.

import "encoding/binary"

// GetStreamRequest is code 200.
type GetStreamRequest struct{ Stream Identifier }

// Code returns CodeGetStream.
func (GetStreamRequest) Code() Code { return CodeGetStream }

// Append appends the encoding of the GetStreamRequest to dst.
func (q GetStreamRequest) Append(dst []byte) []byte {
	return AppendIdentifier(dst, q.Stream)
}

// DecodeGetStreamRequest decodes code 200.
func DecodeGetStreamRequest(body []byte) (GetStreamRequest, error) {
	r := NewReader(body)
	q := GetStreamRequest{r.Identifier()}
	return q, finish(&r, "GetStream")
}

// GetStreamsRequest is code 201 (empty body).
type GetStreamsRequest struct{}

// Code returns CodeGetStreams.
func (GetStreamsRequest) Code() Code { return CodeGetStreams }

// Append appends the encoding of the GetStreamsRequest to dst.
func (GetStreamsRequest) Append(dst []byte) []byte { return dst }

// DecodeGetStreamsRequest ignores body.
func DecodeGetStreamsRequest([]byte) (GetStreamsRequest, error) { return GetStreamsRequest{}, nil }

// CreateStreamRequest is code 202; the server assigns the id.
type CreateStreamRequest struct {
	Name    string
	Options []KV
}

// Code returns CodeCreateStream.
func (CreateStreamRequest) Code() Code { return CodeCreateStream }

// Append appends the encoding of the CreateStreamRequest to dst.
func (q CreateStreamRequest) Append(dst []byte) []byte {
	return AppendKVs(AppendName(dst, q.Name), q.Options)
}

// DecodeCreateStreamRequest decodes code 202.
func DecodeCreateStreamRequest(body []byte) (CreateStreamRequest, error) {
	r := NewReader(body)
	q := CreateStreamRequest{Name: r.Name(), Options: r.tailOptions()}
	return q, finish(&r, "CreateStream")
}

// DeleteStreamRequest is code 203.
type DeleteStreamRequest struct{ Stream Identifier }

// Code returns CodeDeleteStream.
func (DeleteStreamRequest) Code() Code { return CodeDeleteStream }

// Append appends the encoding of the DeleteStreamRequest to dst.
func (q DeleteStreamRequest) Append(dst []byte) []byte {
	return AppendIdentifier(dst, q.Stream)
}

// DecodeDeleteStreamRequest decodes code 203.
func DecodeDeleteStreamRequest(body []byte) (DeleteStreamRequest, error) {
	r := NewReader(body)
	q := DeleteStreamRequest{r.Identifier()}
	return q, finish(&r, "DeleteStream")
}

// UpdateStreamRequest is code 204.
type UpdateStreamRequest struct {
	Stream  Identifier
	Name    string
	Options []KV
}

// Code returns CodeUpdateStream.
func (UpdateStreamRequest) Code() Code { return CodeUpdateStream }

// Append appends the encoding of the UpdateStreamRequest to dst.
func (q UpdateStreamRequest) Append(dst []byte) []byte {
	return AppendKVs(AppendName(AppendIdentifier(dst, q.Stream), q.Name), q.Options)
}

// DecodeUpdateStreamRequest decodes code 204.
func DecodeUpdateStreamRequest(body []byte) (UpdateStreamRequest, error) {
	r := NewReader(body)
	q := UpdateStreamRequest{Stream: r.Identifier(), Name: r.Name(), Options: r.tailOptions()}
	return q, finish(&r, "UpdateStream")
}

// PurgeStreamRequest is code 205.
type PurgeStreamRequest struct{ Stream Identifier }

// Code returns CodePurgeStream.
func (PurgeStreamRequest) Code() Code { return CodePurgeStream }

// Append appends the encoding of the PurgeStreamRequest to dst.
func (q PurgeStreamRequest) Append(dst []byte) []byte {
	return AppendIdentifier(dst, q.Stream)
}

// DecodePurgeStreamRequest decodes code 205.
func DecodePurgeStreamRequest(body []byte) (PurgeStreamRequest, error) {
	r := NewReader(body)
	q := PurgeStreamRequest{r.Identifier()}
	return q, finish(&r, "PurgeStream")
}

// StreamResponse describes one stream: [id u32][created_at u64 µs][topics_count u32]
// [size_bytes u64][messages_count u64][name Name][options_len u32][options TLV].
type StreamResponse struct {
	ID            uint32
	CreatedAt     uint64
	TopicsCount   uint32
	SizeBytes     uint64
	MessagesCount uint64
	Name          string
	Options       []KV
}

// Append appends the encoding of the StreamResponse to dst.
func (s StreamResponse) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, s.ID)
	dst = binary.LittleEndian.AppendUint64(dst, s.CreatedAt)
	dst = binary.LittleEndian.AppendUint32(dst, s.TopicsCount)
	dst = binary.LittleEndian.AppendUint64(dst, s.SizeBytes)
	dst = binary.LittleEndian.AppendUint64(dst, s.MessagesCount)
	dst = AppendName(dst, s.Name)
	return appendPrefixedOptions(dst, s.Options)
}

func (r *Reader) streamResponse() StreamResponse {
	return StreamResponse{ID: r.U32(), CreatedAt: r.U64(), TopicsCount: r.U32(), SizeBytes: r.U64(),
		MessagesCount: r.U64(), Name: r.Name(), Options: r.prefixedOptions()}
}

// DecodeStreamResponse decodes a CreateStream reply payload.
func DecodeStreamResponse(p []byte) (StreamResponse, error) {
	r := NewReader(p)
	s := r.streamResponse()
	return s, finish(&r, "StreamResponse")
}

// DecodeStreams decodes a GetStreams reply payload (StreamResponse repeated to the end).
func DecodeStreams(p []byte) ([]StreamResponse, error) {
	r := NewReader(p)
	var out []StreamResponse
	for r.Remaining() > 0 {
		out = append(out, r.streamResponse())
	}
	return out, finish(&r, "GetStreams reply")
}

// AppendStreams encodes a GetStreams reply payload.
func AppendStreams(dst []byte, streams []StreamResponse) []byte {
	for _, s := range streams {
		dst = s.Append(dst)
	}
	return dst
}

// StreamDetails is the GetStream reply: StreamResponse followed by TopicsCount topic
// headers. Append writes TopicsCount = len(Topics).
type StreamDetails struct {
	StreamResponse
	Topics []TopicHeader
}

// Append appends the encoding of the StreamDetails to dst.
func (s StreamDetails) Append(dst []byte) []byte {
	s.TopicsCount = uint32(len(s.Topics))
	dst = s.StreamResponse.Append(dst)
	for _, t := range s.Topics {
		dst = t.Append(dst)
	}
	return dst
}

// DecodeStreamDetails decodes a GetStream reply payload; found is false (and err nil) for
// the empty payload that means "no such stream".
func DecodeStreamDetails(p []byte) (s StreamDetails, found bool, err error) {
	if len(p) == 0 {
		return StreamDetails{}, false, nil
	}
	r := NewReader(p)
	s.StreamResponse = r.streamResponse()
	if n := r.boundCount(s.TopicsCount, topicHeaderMin); n > 0 {
		s.Topics = make([]TopicHeader, n)
		for i := range s.Topics {
			s.Topics[i] = r.topicHeader()
		}
	}
	return s, true, finish(&r, "StreamDetails")
}
