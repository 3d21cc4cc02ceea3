package sdk

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestConsumedMessageValue(t *testing.T) {
	tests := []struct {
		schema  Schema
		payload string
		want    Payload
		wantErr string
	}{
		{SchemaJSON, `{"a":1.50,"b":["x"]}`, Payload{Kind: SchemaJSON, Raw: []byte(`{"a":1.50,"b":["x"]}`),
			JSON: map[string]any{"a": json.Number("1.50"), "b": []any{"x"}}}, ""},
		{SchemaProto, `{"type_url":"t","value":""}`, Payload{Kind: SchemaJSON, Raw: []byte(`{"type_url":"t","value":""}`),
			JSON: map[string]any{"type_url": "t", "value": ""}}, ""},
		{SchemaText, "héllo", Payload{Kind: SchemaText, Raw: []byte("héllo"), Text: "héllo"}, ""},
		{SchemaRaw, "\x00\xff", Payload{Kind: SchemaRaw, Raw: []byte("\x00\xff")}, ""},
		{SchemaJSON, `{"a":`, Payload{}, "offset 7: json payload is not JSON"},
		{SchemaJSON, `1 2`, Payload{}, "offset 7: json payload has data after its JSON value"},
		{SchemaText, "\xff", Payload{}, "offset 7: text payload is not valid UTF-8"},
	}
	for _, tt := range tests {
		m := ConsumedMessage{Offset: 7, Payload: []byte(tt.payload)}
		got, err := m.Value(tt.schema)
		if tt.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("%s %q: error %v, want %q", tt.schema, tt.payload, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s %q: got %#v, %v; want %#v", tt.schema, tt.payload, got, err, tt.want)
		}
	}
}
