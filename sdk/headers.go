package sdk

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Reading headers back: what a source needs to find its origin position in a message it
// sent (sdk.ReadBack), and what a sink needs to route by a header.

// Lookup returns the value of the first header whose key is the string key.
func Lookup(headers []Header, key string) (HeaderField, bool) {
	for _, h := range headers {
		if h.Key.Kind == HeaderString && string(h.Key.Value) == key {
			return h.Value, true
		}
	}
	return HeaderField{}, false
}

// AsUint64 reads an unsigned field of any width, or a string of decimal digits.
func (f HeaderField) AsUint64() (uint64, error) {
	switch f.Kind {
	case HeaderUint8, HeaderUint16, HeaderUint32, HeaderUint64:
		var b [8]byte
		if len(f.Value) > 8 {
			return 0, fmt.Errorf("header value of %d bytes for kind %d", len(f.Value), f.Kind)
		}
		copy(b[:], f.Value)
		return binary.LittleEndian.Uint64(b[:]), nil
	case HeaderString:
		return strconv.ParseUint(string(f.Value), 10, 64)
	}
	return 0, fmt.Errorf("header of kind %d is not an unsigned integer", f.Kind)
}

// AsString returns a string field's text, or the decimal text of an unsigned one.
func (f HeaderField) AsString() (string, error) {
	if f.Kind == HeaderString || f.Kind == HeaderRaw {
		return string(f.Value), nil
	}
	v, err := f.AsUint64()
	if err != nil {
		return "", err
	}
	return strconv.FormatUint(v, 10), nil
}
