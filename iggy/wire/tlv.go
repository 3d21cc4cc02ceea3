package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// HeaderKind is the kind byte of one TLV: the type of a user-header key or value,
// or of an option.
type HeaderKind uint8

// Header kinds. Fixed-size kinds are little-endian at their natural width.
const (
	KindRaw     HeaderKind = 1
	KindString  HeaderKind = 2
	KindBool    HeaderKind = 3
	KindInt8    HeaderKind = 4
	KindInt16   HeaderKind = 5
	KindInt32   HeaderKind = 6
	KindInt64   HeaderKind = 7
	KindInt128  HeaderKind = 8
	KindUint8   HeaderKind = 9
	KindUint16  HeaderKind = 10
	KindUint32  HeaderKind = 11
	KindUint64  HeaderKind = 12
	KindUint128 HeaderKind = 13
	KindFloat32 HeaderKind = 14
	KindFloat64 HeaderKind = 15
)

// kindWidth is the exact value size of fixed-size kinds (0 = variable 1..255).
var kindWidth = [16]int{0, 0, 0, 1, 1, 2, 4, 8, 16, 1, 2, 4, 8, 16, 4, 8}

// HeaderValue is one typed TLV: a user-header key or value, or an option key or value.
// Raw holds the value bytes as on the wire.
type HeaderValue struct {
	Kind HeaderKind
	Raw  []byte
}

// KV is one key/value entry of a TLV block.
type KV struct {
	Key, Value HeaderValue
}

// Typed constructors.

// RawValue returns a Raw header value (1..255 bytes).
func RawValue(b []byte) HeaderValue { return HeaderValue{KindRaw, b} }

// StringValue returns a String header value (1..255 bytes of UTF-8).
func StringValue(s string) HeaderValue { return HeaderValue{KindString, []byte(s)} }

// BoolValue returns a Bool header value.
func BoolValue(v bool) HeaderValue {
	if v {
		return HeaderValue{KindBool, []byte{1}}
	}
	return HeaderValue{KindBool, []byte{0}}
}

// Int64Value returns an Int64 header value.
func Int64Value(v int64) HeaderValue {
	return HeaderValue{KindInt64, binary.LittleEndian.AppendUint64(nil, uint64(v))}
}

// Uint8Value returns a Uint8 header value.
func Uint8Value(v uint8) HeaderValue { return HeaderValue{KindUint8, []byte{v}} }

// Uint32Value returns a Uint32 header value.
func Uint32Value(v uint32) HeaderValue {
	return HeaderValue{KindUint32, binary.LittleEndian.AppendUint32(nil, v)}
}

// Uint64Value returns a Uint64 header value.
func Uint64Value(v uint64) HeaderValue {
	return HeaderValue{KindUint64, binary.LittleEndian.AppendUint64(nil, v)}
}

// Float64Value returns a Float64 header value.
func Float64Value(v float64) HeaderValue {
	return HeaderValue{KindFloat64, binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))}
}

// StringKV returns an entry with a String key, the usual shape of user headers and the
// only shape of options.
func StringKV(key string, v HeaderValue) KV { return KV{Key: StringValue(key), Value: v} }

// Typed accessors. Each fails with ErrMalformed when the kind does not fit.

// AsString returns a String or Raw value as a string.
func (v HeaderValue) AsString() (string, error) {
	if v.Kind != KindString && v.Kind != KindRaw {
		return "", fmt.Errorf("%w: header kind %d is not a string", ErrMalformed, v.Kind)
	}
	return string(v.Raw), nil
}

// AsBool returns a Bool value.
func (v HeaderValue) AsBool() (bool, error) {
	if v.Kind != KindBool || len(v.Raw) != 1 || v.Raw[0] > 1 {
		return false, fmt.Errorf("%w: header kind %d is not a bool", ErrMalformed, v.Kind)
	}
	return v.Raw[0] == 1, nil
}

// AsUint64 returns a Uint8/16/32/64 value widened to uint64.
func (v HeaderValue) AsUint64() (uint64, error) {
	switch {
	case v.Kind == KindUint8 && len(v.Raw) == 1:
		return uint64(v.Raw[0]), nil
	case v.Kind == KindUint16 && len(v.Raw) == 2:
		return uint64(binary.LittleEndian.Uint16(v.Raw)), nil
	case v.Kind == KindUint32 && len(v.Raw) == 4:
		return uint64(binary.LittleEndian.Uint32(v.Raw)), nil
	case v.Kind == KindUint64 && len(v.Raw) == 8:
		return binary.LittleEndian.Uint64(v.Raw), nil
	}
	return 0, fmt.Errorf("%w: header kind %d is not an unsigned integer", ErrMalformed, v.Kind)
}

// AsInt64 returns an Int8/16/32/64 value widened to int64.
func (v HeaderValue) AsInt64() (int64, error) {
	switch {
	case v.Kind == KindInt8 && len(v.Raw) == 1:
		return int64(int8(v.Raw[0])), nil
	case v.Kind == KindInt16 && len(v.Raw) == 2:
		return int64(int16(binary.LittleEndian.Uint16(v.Raw))), nil
	case v.Kind == KindInt32 && len(v.Raw) == 4:
		return int64(int32(binary.LittleEndian.Uint32(v.Raw))), nil
	case v.Kind == KindInt64 && len(v.Raw) == 8:
		return int64(binary.LittleEndian.Uint64(v.Raw)), nil
	}
	return 0, fmt.Errorf("%w: header kind %d is not a signed integer", ErrMalformed, v.Kind)
}

// AsFloat64 returns a Float32/64 value as float64.
func (v HeaderValue) AsFloat64() (float64, error) {
	switch {
	case v.Kind == KindFloat32 && len(v.Raw) == 4:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(v.Raw))), nil
	case v.Kind == KindFloat64 && len(v.Raw) == 8:
		return math.Float64frombits(binary.LittleEndian.Uint64(v.Raw)), nil
	}
	return 0, fmt.Errorf("%w: header kind %d is not a float", ErrMalformed, v.Kind)
}

// AppendKVs appends kvs as a TLV block (no length prefix): per entry
// [key_kind u8][key_len u32][key][value_kind u8][value_len u32][value].
func AppendKVs(dst []byte, kvs []KV) []byte {
	for _, kv := range kvs {
		dst = appendTLV(dst, kv.Key)
		dst = appendTLV(dst, kv.Value)
	}
	return dst
}

func appendTLV(dst []byte, v HeaderValue) []byte {
	dst = append(dst, byte(v.Kind))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(v.Raw)))
	return append(dst, v.Raw...)
}

// KVsSize returns the encoded size of kvs.
func KVsSize(kvs []KV) int {
	n := 0
	for _, kv := range kvs {
		n += 10 + len(kv.Key.Raw) + len(kv.Value.Raw)
	}
	return n
}

// KVReader walks a TLV block lazily without allocating. Typed is the SDKs' rule set:
// kinds 1..15 only, fixed-size kinds at their exact width, String UTF-8, Bool 0/1.
// Without it only the wire rules apply (non-zero kind, length 1..255).
type KVReader struct {
	r     Reader
	typed bool
}

// NewKVReader returns a reader over block. typed selects the SDK rules (see KVReader).
func NewKVReader(block []byte, typed bool) KVReader {
	return KVReader{r: NewReader(block), typed: typed}
}

// Next returns the next entry (aliasing the block) and true, or false at the end of the
// block or on an error (see Err).
func (k *KVReader) Next() (KV, bool) {
	if k.r.Remaining() == 0 {
		return KV{}, false
	}
	kv := KV{Key: k.tlv(), Value: k.tlv()}
	return kv, k.r.err == nil
}

// Err returns the first error met.
func (k *KVReader) Err() error { return k.r.err }

func (k *KVReader) tlv() HeaderValue {
	r := &k.r
	kind := HeaderKind(r.U8())
	n := r.U32()
	if r.err != nil {
		return HeaderValue{}
	}
	if kind == 0 || n == 0 || n > 255 {
		r.Failf("TLV kind %d length %d", kind, n)
		return HeaderValue{}
	}
	raw := r.Bytes(int(n))
	if k.typed && r.err == nil {
		switch {
		case kind > KindFloat64:
			r.Failf("header kind %d", kind)
		case kindWidth[kind] != 0 && int(n) != kindWidth[kind]:
			r.Failf("header kind %d with length %d", kind, n)
		case kind == KindBool && raw[0] > 1:
			r.Failf("bool header value %d", raw[0])
		case kind == KindString && !utf8.Valid(raw):
			r.Failf("string header is not UTF-8")
		}
	}
	return HeaderValue{Kind: kind, Raw: raw}
}

// DecodeKVs decodes a whole user-header block with the typed rules, appending to dst
// (reuse its backing array to avoid allocation). Entries alias block.
func DecodeKVs(block []byte, dst []KV) ([]KV, error) {
	k := NewKVReader(block, true)
	for {
		kv, ok := k.Next()
		if !ok {
			break
		}
		dst = append(dst, kv)
	}
	if err := k.Err(); err != nil {
		return dst, fmt.Errorf("wire: header block: %w", err)
	}
	return dst, nil
}

// Limits of an options block.
const (
	MaxOptionPairs = 1024
	MaxOptionBytes = 100_000
	// MaxUserHeadersBytes is the client-side limit of a message's header block.
	MaxUserHeadersBytes = 100_000
)

// DecodeOptions decodes a resource options block (streams, topics): the wire TLV rules
// plus String keys in UTF-8, unique keys, at most MaxOptionPairs pairs and MaxOptionBytes
// bytes. It copies the block, so the result does not alias the input; an empty block
// decodes to nil.
func DecodeOptions(block []byte) ([]KV, error) {
	if len(block) == 0 {
		return nil, nil
	}
	if len(block) > MaxOptionBytes {
		return nil, fmt.Errorf("%w: options block of %d bytes", ErrMalformed, len(block))
	}
	block = bytes.Clone(block)
	k := NewKVReader(block, false)
	kvs := make([]KV, 0, min(MaxOptionPairs, len(block)/12))
	for {
		kv, ok := k.Next()
		if !ok {
			break
		}
		if kv.Key.Kind != KindString || !utf8.Valid(kv.Key.Raw) {
			return nil, fmt.Errorf("%w: option key must be a UTF-8 string (kind %d)", ErrMalformed, kv.Key.Kind)
		}
		if len(kvs) == MaxOptionPairs {
			return nil, fmt.Errorf("%w: more than %d options", ErrMalformed, MaxOptionPairs)
		}
		for _, prev := range kvs {
			if bytes.Equal(prev.Key.Raw, kv.Key.Raw) {
				return nil, fmt.Errorf("%w: duplicate option key %q", ErrMalformed, kv.Key.Raw)
			}
		}
		kvs = append(kvs, kv)
	}
	if err := k.Err(); err != nil {
		return nil, fmt.Errorf("wire: options block: %w", err)
	}
	return kvs, nil
}

// LookupKV returns the value of the first entry whose key bytes equal key.
func LookupKV(kvs []KV, key string) (HeaderValue, bool) {
	for _, kv := range kvs {
		if string(kv.Key.Raw) == key {
			return kv.Value, true
		}
	}
	return HeaderValue{}, false
}

// appendPrefixedOptions appends [len u32][block] for a response options block.
func appendPrefixedOptions(dst []byte, kvs []KV) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(KVsSize(kvs)))
	return AppendKVs(dst, kvs)
}

// prefixedOptions reads [len u32][options block].
func (r *Reader) prefixedOptions() []KV {
	b := r.Bytes(int(r.U32()))
	if r.err != nil {
		return nil
	}
	kvs, err := DecodeOptions(b)
	if err != nil {
		r.Fail(err)
	}
	return kvs
}

// tailOptions reads the options block that ends a request body.
func (r *Reader) tailOptions() []KV {
	b := r.Rest()
	if r.err != nil {
		return nil
	}
	kvs, err := DecodeOptions(b)
	if err != nil {
		r.Fail(err)
	}
	return kvs
}
