package wire

// Consumer offsets.
//   - GetConsumerOffset (120, op 2): [Consumer][stream Id][topic Id][opt partition] →
//     ConsumerOffsetInfo (20 B); an empty payload means "no stored offset" (also for an
//     unknown stream/topic/group or an undecodable body). An absent partition means 0.
//   - StoreConsumerOffset (121, op 161): … [offset u64][ack u8] → result section only.
//   - DeleteConsumerOffset (122, op 162): … [ack u8] → result section only.
//     Store and Delete need the partition for both consumer kinds (else S:20).

import "encoding/binary"

// GetConsumerOffsetRequest is code 120.
type GetConsumerOffsetRequest struct {
	Consumer      Consumer
	Stream, Topic Identifier
	Partition     OptionalPartition
}

// Code returns CodeGetConsumerOffset.
func (GetConsumerOffsetRequest) Code() Code { return CodeGetConsumerOffset }

// Append appends the encoding of the GetConsumerOffsetRequest to dst.
func (q GetConsumerOffsetRequest) Append(dst []byte) []byte {
	return appendOffsetTarget(dst, q.Consumer, q.Stream, q.Topic, q.Partition)
}

// DecodeGetConsumerOffsetRequest decodes code 120.
func DecodeGetConsumerOffsetRequest(body []byte) (GetConsumerOffsetRequest, error) {
	r := NewReader(body)
	q := GetConsumerOffsetRequest{r.Consumer(), r.Identifier(), r.Identifier(), r.OptionalPartition()}
	return q, finish(&r, "GetConsumerOffset")
}

// StoreConsumerOffsetRequest is code 121.
type StoreConsumerOffsetRequest struct {
	Consumer      Consumer
	Stream, Topic Identifier
	Partition     OptionalPartition
	Offset        uint64
	Ack           AckLevel
}

// Code returns CodeStoreConsumerOffset.
func (StoreConsumerOffsetRequest) Code() Code { return CodeStoreConsumerOffset }

// Append appends the encoding of the StoreConsumerOffsetRequest to dst.
func (q StoreConsumerOffsetRequest) Append(dst []byte) []byte {
	dst = appendOffsetTarget(dst, q.Consumer, q.Stream, q.Topic, q.Partition)
	return append(binary.LittleEndian.AppendUint64(dst, q.Offset), byte(q.Ack))
}

// DecodeStoreConsumerOffsetRequest decodes code 121.
func DecodeStoreConsumerOffsetRequest(body []byte) (StoreConsumerOffsetRequest, error) {
	r := NewReader(body)
	q := StoreConsumerOffsetRequest{r.Consumer(), r.Identifier(), r.Identifier(), r.OptionalPartition(), r.U64(), r.AckLevel()}
	return q, finish(&r, "StoreConsumerOffset")
}

// DeleteConsumerOffsetRequest is code 122.
type DeleteConsumerOffsetRequest struct {
	Consumer      Consumer
	Stream, Topic Identifier
	Partition     OptionalPartition
	Ack           AckLevel
}

// Code returns CodeDeleteConsumerOffset.
func (DeleteConsumerOffsetRequest) Code() Code { return CodeDeleteConsumerOffset }

// Append appends the encoding of the DeleteConsumerOffsetRequest to dst.
func (q DeleteConsumerOffsetRequest) Append(dst []byte) []byte {
	dst = appendOffsetTarget(dst, q.Consumer, q.Stream, q.Topic, q.Partition)
	return append(dst, byte(q.Ack))
}

// DecodeDeleteConsumerOffsetRequest decodes code 122.
func DecodeDeleteConsumerOffsetRequest(body []byte) (DeleteConsumerOffsetRequest, error) {
	r := NewReader(body)
	q := DeleteConsumerOffsetRequest{r.Consumer(), r.Identifier(), r.Identifier(), r.OptionalPartition(), r.AckLevel()}
	return q, finish(&r, "DeleteConsumerOffset")
}

func appendOffsetTarget(dst []byte, c Consumer, stream, topic Identifier, p OptionalPartition) []byte {
	dst = AppendConsumer(dst, c)
	dst = AppendIdentifier(AppendIdentifier(dst, stream), topic)
	return AppendOptionalPartition(dst, p)
}

// ConsumerOffsetInfo is the GetConsumerOffset reply: [partition_id u32]
// [current_offset u64][stored_offset u64].
type ConsumerOffsetInfo struct {
	PartitionID   uint32
	CurrentOffset uint64
	StoredOffset  uint64
}

// Append appends the encoding of the ConsumerOffsetInfo to dst.
func (c ConsumerOffsetInfo) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, c.PartitionID)
	dst = binary.LittleEndian.AppendUint64(dst, c.CurrentOffset)
	return binary.LittleEndian.AppendUint64(dst, c.StoredOffset)
}

// DecodeConsumerOffsetInfo decodes a GetConsumerOffset reply payload; found is false (and
// err nil) for the empty payload that means "no stored offset".
func DecodeConsumerOffsetInfo(p []byte) (c ConsumerOffsetInfo, found bool, err error) {
	if len(p) == 0 {
		return ConsumerOffsetInfo{}, false, nil
	}
	r := NewReader(p)
	c = ConsumerOffsetInfo{r.U32(), r.U64(), r.U64()}
	return c, true, finish(&r, "ConsumerOffsetInfo")
}
