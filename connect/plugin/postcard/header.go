package postcard

import (
	"bytes"
	"encoding/base64"
	"slices"
	"unsafe"

	"github.com/ferryio/ferry/sdk"
)

// Header maps are BTreeMap<HeaderField, HeaderField>. A HeaderField is {kind: HeaderKind as a
// varint of its 0-based serde index (= Iggy wire code - 1), value: String holding the
// standard Base64 (with padding) of the raw value bytes}. Rust iterates the map in key order:
// kind, then raw value bytes.

const maxHeaderKind = sdk.HeaderFloat64

// compareField orders header fields as Rust's derived Ord on HeaderField does.
func compareField(a, b sdk.HeaderField) int {
	if a.Kind != b.Kind {
		if a.Kind < b.Kind {
			return -1
		}
		return 1
	}
	return bytes.Compare(a.Value, b.Value)
}

func appendField(dst []byte, f sdk.HeaderField) []byte {
	dst = AppendUvarint(dst, uint64(f.Kind)-1)
	dst = AppendUvarint(dst, uint64(base64.StdEncoding.EncodedLen(len(f.Value))))
	return base64.StdEncoding.AppendEncode(dst, f.Value)
}

func fieldLen(f sdk.HeaderField) int {
	n := base64.StdEncoding.EncodedLen(len(f.Value))
	return uvarintLen(uint64(f.Kind)-1) + uvarintLen(uint64(n)) + n
}

// Encoder holds scratch space for header maps so encoding into a reused buffer does not
// allocate. The zero value is ready; an Encoder is not safe for concurrent use.
type Encoder struct {
	order []int // indexes of the map entries, sorted, duplicates removed
}

// sortHeaders fills e.order with the entries of h in map order, the last of duplicate keys
// kept. Kinds outside 1..15 are the caller's error; they are checked by validHeaders.
func (e *Encoder) sortHeaders(h []sdk.Header) []int {
	o := e.order[:0]
	for i := range h {
		o = append(o, i)
	}
	sorted := true
	for i := 1; i < len(h); i++ {
		if compareField(h[i-1].Key, h[i].Key) >= 0 {
			sorted = false
			break
		}
	}
	if !sorted {
		slices.SortStableFunc(o, func(a, b int) int { return compareField(h[a].Key, h[b].Key) })
		w := 0
		for i := range o {
			if i+1 < len(o) && compareField(h[o[i]].Key, h[o[i+1]].Key) == 0 {
				continue // a later duplicate wins
			}
			o[w] = o[i]
			w++
		}
		o = o[:w]
	}
	e.order = o
	return o
}

func validHeaders(h []sdk.Header) error {
	for i := range h {
		for _, k := range [2]sdk.HeaderKind{h[i].Key.Kind, h[i].Value.Kind} {
			if k < sdk.HeaderRaw || k > maxHeaderKind {
				return errHeaderKind(k)
			}
		}
	}
	return nil
}

// AppendHeaderMap appends h as a postcard header map (entry count, then key, value pairs in
// key order; a later duplicate key wins). Kinds must be 1..15.
func (e *Encoder) AppendHeaderMap(dst []byte, h []sdk.Header) ([]byte, error) {
	if err := validHeaders(h); err != nil {
		return dst, err
	}
	return e.appendHeaderMap(dst, h), nil
}

func (e *Encoder) appendHeaderMap(dst []byte, h []sdk.Header) []byte {
	return appendSortedMap(dst, h, e.sortHeaders(h))
}

// appendSortedMap appends the map of the entries o (from sortHeaders) of h.
func appendSortedMap(dst []byte, h []sdk.Header, o []int) []byte {
	dst = AppendUvarint(dst, uint64(len(o)))
	for _, i := range o {
		dst = appendField(dst, h[i].Key)
		dst = appendField(dst, h[i].Value)
	}
	return dst
}

// appendHeaderBlob appends h as a RawMessage headers blob: the map's encoded length, then
// the map. It sorts h once.
func (e *Encoder) appendHeaderBlob(dst []byte, h []sdk.Header) []byte {
	o := e.sortHeaders(h)
	n := uvarintLen(uint64(len(o)))
	for _, i := range o {
		n += fieldLen(h[i].Key) + fieldLen(h[i].Value)
	}
	return appendSortedMap(AppendUvarint(dst, uint64(n)), h, o)
}

// headerBlobBound bounds the bytes appendHeaderBlob appends for h: duplicates counted, each
// field's kind and text length taken at their widest.
func headerBlobBound(h []sdk.Header) int {
	n := 2 * maxU64Len // blob length, entry count
	for i := range h {
		n += 2*(1+maxU64Len) + base64.StdEncoding.EncodedLen(len(h[i].Key.Value)) +
			base64.StdEncoding.EncodedLen(len(h[i].Value.Value))
	}
	return n
}

// minFieldLen is the smallest encoding of a HeaderField: kind + empty string.
const minFieldLen = 2

func (r *Reader) headerField() sdk.HeaderField {
	k := r.U32()
	if r.err != nil {
		return sdk.HeaderField{}
	}
	if k > uint32(maxHeaderKind-1) {
		r.fail(ErrUnknownVariant, "header kind")
		return sdk.HeaderField{}
	}
	text := r.rawBytes("header value")
	if r.err != nil {
		return sdk.HeaderField{}
	}
	v, ok := decodeBase64(text)
	if !ok {
		r.off -= len(text)
		r.fail(ErrBadBase64, "header value")
		return sdk.HeaderField{}
	}
	return sdk.HeaderField{Kind: sdk.HeaderKind(k + 1), Value: v}
}

// decodeBase64 decodes standard-alphabet Base64 as serde_with/base64 0.22 do: padding
// optional, non-zero trailing bits rejected, and (unlike Go's decoder) CR/LF rejected.
func decodeBase64(text []byte) ([]byte, bool) {
	if bytes.ContainsAny(text, "\r\n") {
		return nil, false
	}
	enc := base64.StdEncoding.Strict()
	if len(text)%4 != 0 {
		enc = base64.RawStdEncoding.Strict()
	}
	out := make([]byte, enc.DecodedLen(len(text)))
	n, err := enc.Decode(out, text)
	if err != nil {
		return nil, false
	}
	return out[:n], true
}

// HeaderMap reads a header map. The result is in map order (kind, then raw value bytes) with
// duplicate keys collapsed, the later value winning, as Rust's BTreeMap does; it is non-nil
// (possibly empty) on success.
func (r *Reader) HeaderMap() []sdk.Header {
	n := r.length(2*minFieldLen, "header map")
	if r.err != nil {
		return nil
	}
	h := make([]sdk.Header, 0, r.capHint(n, int(unsafe.Sizeof(sdk.Header{}))))
	for i := 0; i < n; i++ {
		k := r.headerField()
		v := r.headerField()
		if r.err != nil {
			return nil
		}
		h = append(h, sdk.Header{Key: k, Value: v})
	}
	return normalizeHeaders(h)
}

// normalizeHeaders sorts h by key and keeps the last of equal keys, in place.
func normalizeHeaders(h []sdk.Header) []sdk.Header {
	slices.SortStableFunc(h, func(a, b sdk.Header) int { return compareField(a.Key, b.Key) })
	w := 0
	for i := range h {
		if i+1 < len(h) && compareField(h[i].Key, h[i+1].Key) == 0 {
			continue
		}
		h[w] = h[i]
		w++
	}
	return h[:w]
}

// DecodeHeaderMap decodes a header map from the start of b (trailing bytes are ignored, as
// postcard's from_bytes does).
func DecodeHeaderMap(b []byte) ([]sdk.Header, error) {
	r := NewReader(b)
	h := r.HeaderMap()
	return h, r.Err()
}
