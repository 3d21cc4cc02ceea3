package connect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/ferryio/ferry/sdk"
)

// encodePayload turns a payload a source produced in schema from into the bytes sent to a
// stream whose schema is to, following Iggy's source encoders where Ferry can without
// transforms:
//
//   - same schema: bytes unchanged (json is checked to parse, text to be UTF-8);
//   - to json: text becomes a JSON string literal; raw must already be valid JSON;
//   - to text: json is sent as its text; raw must be UTF-8;
//   - to raw: bytes unchanged (bytes are bytes; upstream refuses non-raw payloads);
//   - anything else is an error.
//
// An error rejects the whole batch, as upstream since PR #3855.
func encodePayload(from, to sdk.Schema, p []byte) ([]byte, error) {
	if from == "" {
		from = to
	}
	switch to {
	case sdk.SchemaJSON:
		switch from {
		case sdk.SchemaJSON, sdk.SchemaRaw:
			if !json.Valid(p) {
				return nil, fmt.Errorf("payload is not valid JSON (stream schema json)")
			}
			return p, nil
		case sdk.SchemaText:
			if !utf8.Valid(p) {
				return nil, fmt.Errorf("text payload is not valid UTF-8")
			}
			var b bytes.Buffer
			e := json.NewEncoder(&b)
			e.SetEscapeHTML(false)
			if err := e.Encode(string(p)); err != nil {
				return nil, err
			}
			return bytes.TrimRight(b.Bytes(), "\n"), nil
		}
	case sdk.SchemaText:
		switch from {
		case sdk.SchemaText, sdk.SchemaJSON, sdk.SchemaRaw:
			if !utf8.Valid(p) {
				return nil, fmt.Errorf("payload is not valid UTF-8 (stream schema text)")
			}
			return p, nil
		}
	case sdk.SchemaRaw:
		return p, nil
	default:
		if from == to {
			return p, nil
		}
	}
	return nil, fmt.Errorf("cannot convert a %s payload to the stream's schema %s", from, to)
}
