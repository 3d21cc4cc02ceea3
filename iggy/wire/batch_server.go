package wire

// Server side of message batches: admission (ValidateBatch), stamping at append
// (StampBatch) and serving a partly selected batch (SliceBatch).

import (
	"encoding/binary"
	"fmt"

	"github.com/zeebo/xxh3"
)

// Batch faults. Each matches ErrMalformed except the checksum faults, which match
// ErrInvalidMessageChecksum (4027) and ErrInvalidBatchChecksum (4039), so [ErrorCode] maps
// every fault to a reply status. Upstream sends no reply for a faulty batch; our server
// answers with that status.
var (
	// ErrBatchLength: batch_length differs from the bytes available, or is < 256.
	ErrBatchLength error = &codecError{"wire: batch length mismatch", ErrMalformed}
	// ErrBatchCount: message_count is 0, differs from the frames present, or from the
	// SendMessages metadata count.
	ErrBatchCount error = &codecError{"wire: batch message count mismatch", ErrMalformed}
	// ErrBatchReserved: a reserved byte of the batch header is non-zero.
	ErrBatchReserved error = &codecError{"wire: non-zero reserved byte in batch header", ErrMalformed}
	// ErrFrameReserved: a reserved byte of a frame header is non-zero.
	ErrFrameReserved error = &codecError{"wire: non-zero reserved byte in frame header", ErrMalformed}
	// ErrFrameTiling: frames do not tile the batch exactly (a frame overruns it).
	ErrFrameTiling error = &codecError{"wire: frames do not tile the batch", ErrMalformed}
)

// checkLayout checks a batch's structure (not its checksums): length = len(b), a count ≥ 1
// matching the frames, zero reserved bytes, frames tiling exactly. It also verifies frame
// checksums when frameSums is set. Positions in errors are byte offsets within b.
func checkLayout(b []byte, frameSums bool) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: %d bytes, less than a batch header", ErrBatchLength, len(b))
	}
	h := getBatchHeader(b)
	if h.Length != uint64(len(b)) {
		return h, fmt.Errorf("%w: batch_length %d, %d bytes present", ErrBatchLength, h.Length, len(b))
	}
	if h.MessageCount == 0 {
		return h, fmt.Errorf("%w: message_count 0", ErrBatchCount)
	}
	for i := bhReserved; i < BatchHeaderSize; i++ {
		if b[i] != 0 {
			return h, fmt.Errorf("%w: byte %d", ErrBatchReserved, i)
		}
	}
	le := binary.LittleEndian
	n := uint32(0)
	for p := BatchHeaderSize; p < len(b); n++ {
		if len(b)-p < FrameHeaderSize {
			return h, fmt.Errorf("%w: frame %d at byte %d: %d bytes left, less than a frame header",
				ErrFrameTiling, n, p, len(b)-p)
		}
		if r := le.Uint64(b[p+fhReserved:]); r != 0 {
			return h, fmt.Errorf("%w: frame %d at byte %d", ErrFrameReserved, n, p)
		}
		size := uint64(FrameHeaderSize) + uint64(le.Uint32(b[p+fhPayLen:])) + uint64(le.Uint32(b[p+fhHdrLen:]))
		if size > uint64(len(b)-p) {
			return h, fmt.Errorf("%w: frame %d at byte %d: %d bytes, %d left", ErrFrameTiling, n, p, size, len(b)-p)
		}
		if frameSums {
			f := b[p : p+int(size)]
			if got, want := xxh3.Hash(f[8:]), le.Uint64(f); got != want {
				return h, fmt.Errorf("wire: frame %d at byte %d: checksum %#016x, computed %#016x: %w",
					n, p, want, got, ErrInvalidMessageChecksum)
			}
		}
		p += int(size)
	}
	if n != h.MessageCount {
		return h, fmt.Errorf("%w: message_count %d, %d frames", ErrBatchCount, h.MessageCount, n)
	}
	return h, nil
}

// ValidateBatch applies the server's admission checks to one batch (the whole of b): its
// length, count, reserved bytes and tiling, every frame checksum and the batch checksum.
// The error names the fault (see the ErrBatch… and ErrFrame… values) and the frame index
// and byte position. It does not allocate on success.
func ValidateBatch(b []byte) (BatchHeader, error) {
	h, err := checkLayout(b, true)
	if err != nil {
		return h, err
	}
	if got := batchChecksum(b); got != h.Checksum {
		return h, fmt.Errorf("wire: batch checksum %#016x, computed %#016x: %w", h.Checksum, got, ErrInvalidBatchChecksum)
	}
	return h, nil
}

// CheckBatchLayout checks a batch's structure like ValidateBatch but no checksum.
func CheckBatchLayout(b []byte) (BatchHeader, error) { return checkLayout(b, false) }

// StampBatch writes the server's fields into a batch in place (partition id, base offset,
// base timestamp) and recomputes the batch checksum. It fails (leaving b unchanged) if b
// is not a well-formed batch.
func StampBatch(b []byte, partitionID, baseOffset, baseTimestamp uint64) error {
	if _, err := checkLayout(b, false); err != nil {
		return err
	}
	le := binary.LittleEndian
	le.PutUint64(b[bhPartition:], partitionID)
	le.PutUint64(b[bhBaseOff:], baseOffset)
	le.PutUint64(b[bhBaseTime:], baseTimestamp)
	le.PutUint64(b[bhChecksum:], batchChecksum(b))
	return nil
}

// ErrSliceRange: SliceBatch was asked for frames outside the batch.
var ErrSliceRange = fmt.Errorf("wire: frame range outside the batch: %w", ErrInvalidCommand)

// SliceBatch appends to dst the part of batch b holding frames [from, to) (indices, not
// offsets): the header keeps base_offset, base_timestamp and origin_timestamp, gets
// message_count = to-from, the reduced batch_length and a recomputed checksum; frames are
// copied byte for byte (so the first one's offset_delta may be > 0). A full range copies b
// unchanged. It does not allocate when dst has room.
func SliceBatch(dst, b []byte, from, to int) ([]byte, error) {
	h, err := checkLayout(b, false)
	if err != nil {
		return dst, err
	}
	if from < 0 || to > int(h.MessageCount) || from >= to {
		return dst, fmt.Errorf("[%d, %d) of %d frames: %w", from, to, h.MessageCount, ErrSliceRange)
	}
	if from == 0 && to == int(h.MessageCount) {
		return append(dst, b...), nil
	}
	le := binary.LittleEndian
	lo, hi := 0, 0
	for i, p := 0, BatchHeaderSize; i <= to; i++ {
		if i == from {
			lo = p
		}
		if i == to {
			hi = p
			break
		}
		p += FrameHeaderSize + int(le.Uint32(b[p+fhPayLen:])) + int(le.Uint32(b[p+fhHdrLen:]))
	}
	start := len(dst)
	dst = append(dst, b[:BatchHeaderSize]...)
	dst = append(dst, b[lo:hi]...)
	out := dst[start:]
	le.PutUint32(out[bhCount:], uint32(to-from))
	le.PutUint64(out[bhLength:], uint64(len(out)))
	le.PutUint64(out[bhChecksum:], batchChecksum(out))
	return dst, nil
}

// SliceBatchFrom appends the frames of batch b whose offset (base_offset + offset_delta)
// is ≥ start, at most limit of them (limit ≤ 0 means no limit), using SliceBatch. It returns
// the number of frames kept; with 0 kept dst is returned unchanged.
func SliceBatchFrom(dst, b []byte, start uint64, limit int) ([]byte, int, error) {
	h, err := checkLayout(b, false)
	if err != nil {
		return dst, 0, err
	}
	le := binary.LittleEndian
	from := -1
	for i, p := 0, BatchHeaderSize; p < len(b); i++ {
		if h.BaseOffset+uint64(le.Uint32(b[p+fhOffDelta:])) >= start {
			from = i
			break
		}
		p += FrameHeaderSize + int(le.Uint32(b[p+fhPayLen:])) + int(le.Uint32(b[p+fhHdrLen:]))
	}
	if from < 0 {
		return dst, 0, nil
	}
	to := int(h.MessageCount)
	if limit > 0 && to-from > limit {
		to = from + limit
	}
	dst, err = SliceBatch(dst, b, from, to)
	return dst, to - from, err
}
