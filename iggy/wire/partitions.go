package wire

// Partitions.
//   - CreatePartitions (402, op 136): [stream Id][topic Id][partitions_count u32] → ∅.
//     New ids continue from max+1. S:2015 if the count is 0 or > 1000.
//   - DeletePartitions (403, op 137): same body → ∅; removes the highest ids.
//     R:2019 if more than exist.

import "encoding/binary"

// CreatePartitionsRequest is code 402.
type CreatePartitionsRequest struct {
	Stream, Topic   Identifier
	PartitionsCount uint32
}

// Code returns CodeCreatePartitions.
func (CreatePartitionsRequest) Code() Code { return CodeCreatePartitions }

// Append appends the encoding of the CreatePartitionsRequest to dst.
func (q CreatePartitionsRequest) Append(dst []byte) []byte {
	return appendPartitionsBody(dst, q.Stream, q.Topic, q.PartitionsCount)
}

// DecodeCreatePartitionsRequest decodes code 402.
func DecodeCreatePartitionsRequest(body []byte) (CreatePartitionsRequest, error) {
	r := NewReader(body)
	q := CreatePartitionsRequest{r.Identifier(), r.Identifier(), r.U32()}
	return q, finish(&r, "CreatePartitions")
}

// DeletePartitionsRequest is code 403.
type DeletePartitionsRequest struct {
	Stream, Topic   Identifier
	PartitionsCount uint32
}

// Code returns CodeDeletePartitions.
func (DeletePartitionsRequest) Code() Code { return CodeDeletePartitions }

// Append appends the encoding of the DeletePartitionsRequest to dst.
func (q DeletePartitionsRequest) Append(dst []byte) []byte {
	return appendPartitionsBody(dst, q.Stream, q.Topic, q.PartitionsCount)
}

// DecodeDeletePartitionsRequest decodes code 403.
func DecodeDeletePartitionsRequest(body []byte) (DeletePartitionsRequest, error) {
	r := NewReader(body)
	q := DeletePartitionsRequest{r.Identifier(), r.Identifier(), r.U32()}
	return q, finish(&r, "DeletePartitions")
}

func appendPartitionsBody(dst []byte, stream, topic Identifier, count uint32) []byte {
	dst = AppendIdentifier(AppendIdentifier(dst, stream), topic)
	return binary.LittleEndian.AppendUint32(dst, count)
}
