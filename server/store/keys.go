package store

import (
	"encoding/binary"
	"fmt"
)

// Key prefixes; see the layout in doc.go.
const (
	kStream    = 's'
	kTopic     = 't'
	kPartition = 'p'
	kGroup     = 'g'
	kGroupSeq  = 'G'
	kUser      = 'u'
	kToken     = 'a'
	kData      = 'd'

	// sub-keys under a partition's data prefix
	dBatch   = 'b'
	dIndex   = 'i'
	dTime    = 'T'
	dOffset  = 'c'
	dState   = 's'
	dSegment = 'S'
)

func key(prefix byte, ids ...uint32) []byte {
	k := make([]byte, 1, 1+4*len(ids)+17)
	k[0] = prefix
	for _, id := range ids {
		k = binary.BigEndian.AppendUint32(k, id)
	}
	return k
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

func dataPrefix(k PartitionKey) []byte {
	return key(kData, k.Stream, k.Topic, k.Partition)
}

func dataKey(k PartitionKey, sub byte, tail ...uint64) []byte {
	b := append(dataPrefix(k), sub)
	for _, v := range tail {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

func offsetKey(k PartitionKey, c Consumer) []byte {
	b := append(dataPrefix(k), dOffset, byte(c.Kind))
	return binary.BigEndian.AppendUint32(b, c.ID)
}

// tailU64 reads the big-endian u64 at byte off of key.
func tailU64(key []byte, off int) (uint64, error) {
	if len(key) < off+8 {
		return 0, fmt.Errorf("%w: short key %x", ErrCorrupt, key)
	}
	return binary.BigEndian.Uint64(key[off:]), nil
}

// Value encoding: a version byte, then fixed-width big-endian numbers and
// u32-length-prefixed byte strings.
const recordVersion = 1

func appendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }
func appendBytes(b, v []byte) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(v))), v...)
}

// reader decodes a record with a sticky error: read every field, then check
// err once.
type reader struct {
	b   []byte
	err error
}

func newReader(b []byte) *reader {
	r := &reader{b: b}
	if r.u8() != recordVersion && r.err == nil {
		r.err = fmt.Errorf("%w: unknown record version", ErrCorrupt)
	}
	return r
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("%w: record too short", ErrCorrupt)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// bytes returns a copy (values live in Pebble's memory).
func (r *reader) bytes() []byte {
	n := r.u32()
	v := r.take(int(n))
	if v == nil {
		return nil
	}
	return append([]byte(nil), v...)
}

func (r *reader) str() string { return string(r.bytes()) }

// done returns the sticky error, or ErrCorrupt if bytes are left over.
func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(r.b))
	}
	return r.err
}
