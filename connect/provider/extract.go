package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// extractor takes the payload out of a provider's answer: the value at dataPath (the whole
// body when ""), after checking that errorPath holds nothing. Paths are dotted names;
// a segment that is a number indexes an array.
type extractor struct {
	dataPath, errorPath string
}

// errorAt returns the error message at errorPath of body: a JSON string as is, any other
// non-null value as JSON; "" when errorPath is unset, absent or null, or body is not JSON.
func (x extractor) errorAt(body []byte) string {
	if x.errorPath == "" {
		return ""
	}
	v, ok := navigate(body, x.errorPath)
	if !ok || isNull(v) {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(compact(v))
}

// data returns the payload of a successful answer.
func (x extractor) data(body []byte) (json.RawMessage, error) {
	if !json.Valid(body) {
		return nil, fmt.Errorf("the response is not JSON: %s", excerpt(body))
	}
	if msg := x.errorAt(body); msg != "" {
		return nil, fmt.Errorf("the provider answered with an error at %s: %s", x.errorPath, msg)
	}
	if x.dataPath == "" {
		return body, nil
	}
	v, ok := navigate(body, x.dataPath)
	if !ok {
		return nil, fmt.Errorf("response.data_path %q is not in the response (%s)", x.dataPath, shape(body))
	}
	return v, nil
}

// navigate returns the value at a dotted path of doc.
func navigate(doc []byte, path string) (json.RawMessage, bool) {
	cur := json.RawMessage(doc)
	for _, seg := range strings.Split(path, ".") {
		switch firstByte(cur) {
		case '{':
			var m map[string]json.RawMessage
			if json.Unmarshal(cur, &m) != nil {
				return nil, false
			}
			next, ok := m[seg]
			if !ok {
				return nil, false
			}
			cur = next
		case '[':
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 {
				return nil, false
			}
			var a []json.RawMessage
			if json.Unmarshal(cur, &a) != nil || i >= len(a) {
				return nil, false
			}
			cur = a[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func firstByte(v []byte) byte {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

func isNull(v []byte) bool { return string(bytes.TrimSpace(v)) == "null" }

func compact(v []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return v
	}
	return b.Bytes()
}

// shape summarises a JSON document for an error: an object's first keys, an array's length.
func shape(doc []byte) string {
	switch firstByte(doc) {
	case '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(doc, &m) != nil {
			return "an object"
		}
		keys := slices.Sorted(maps.Keys(m))
		if len(keys) == 0 {
			return "an empty object"
		}
		if len(keys) > 5 {
			return fmt.Sprintf("an object with keys %s and %d more", strings.Join(keys[:5], ", "), len(keys)-5)
		}
		return "an object with keys " + strings.Join(keys, ", ")
	case '[':
		var a []json.RawMessage
		_ = json.Unmarshal(doc, &a)
		return fmt.Sprintf("an array of %d items", len(a))
	}
	return "a " + kindOf(doc)
}

func kindOf(v []byte) string {
	switch firstByte(v) {
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// excerpt is the start of a body for an error message.
func excerpt(b []byte) string {
	const limit = 512
	s := strings.TrimSpace(string(b))
	if len(s) > limit {
		return s[:limit] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
