package connect

import (
	"errors"
	"strings"
	"testing"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// failOn is a transform that fails on objects holding key "bad".
type failOn struct{}

func (failOn) Apply(v *fastjson.Value, _ *fastjson.Arena) (*fastjson.Value, error) {
	if v.Get("bad") != nil {
		return nil, errors.New("bad field")
	}
	return v, nil
}

// TestConvertPoison: the converter leaves out a message that fails decode and one that
// fails a transform, lists both as poison with their stage and original bytes, counts
// them, and hands the rest to the sink re-encoded; each poisoned message's dead letter
// carries its stage and offset.
func TestConvertPoison(t *testing.T) {
	pipe, err := newPayloadPipeline(sdk.SchemaJSON, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	pipe.chain.Append("fail_on_bad", failOn{})
	c := converter{pipe: pipe}
	var counters Counters
	ms := []wire.Message{
		{Offset: 10, Payload: []byte(`{ "a" : 1 }`)},
		{Offset: 11, Payload: []byte(`{"a":`)},
		{Offset: 12, Payload: []byte(`{"bad":true}`)},
		{Offset: 13, Payload: []byte(`[1, 2]`)},
	}
	out := c.convert(ms, &counters)
	if len(out) != 2 || out[0].Offset != 10 || string(out[0].Payload) != `{"a":1}` || out[1].Offset != 13 || string(out[1].Payload) != `[1,2]` {
		t.Fatalf("converted %+v", out)
	}
	if len(c.poison) != 2 || c.poison[0].msg.Offset != 11 || c.poison[0].stage != stageDecode ||
		c.poison[1].msg.Offset != 12 || c.poison[1].stage != stageTransform || string(c.poison[1].msg.Payload) != `{"bad":true}` {
		t.Fatalf("poison %+v", c.poison)
	}
	if got := c.poison[1].cause().Error(); got != "offset 12: transform: transform fail_on_bad: bad field" {
		t.Fatalf("cause %q", got)
	}
	if s := counters.Snapshot(); s.Decoded != 3 || s.DecodeErrors != 1 || s.TransformErrors != 1 {
		t.Fatalf("counters %+v", s)
	}
	dl := deadLetters(poisonFailure(sdk.TopicMetadata{Stream: "s", Topic: "t"}, 0, c.poison))[1]
	hs := map[string]string{}
	for _, h := range dl.Headers {
		hs[string(h.Key.Value)] = string(h.Value.Value)
	}
	if hs[HeaderStage] != "transform" || hs[HeaderError] != "offset 12: transform: transform fail_on_bad: bad field" || string(dl.Payload) != `{"bad":true}` {
		t.Fatalf("dead letter %v %q", hs, dl.Payload)
	}
}

// TestConvertJSONWithoutTransforms: with no transform, a compact payload reaches the sink
// as the very bytes polled (not a copy), one with spaces or escapes re-encoded as before,
// and a payload that is not JSON is still poison at the decode stage with its error.
func TestConvertJSONWithoutTransforms(t *testing.T) {
	pipe, err := newPayloadPipeline(sdk.SchemaJSON, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := converter{pipe: pipe}
	var counters Counters
	compact := []byte(`{"a":"b c","n":[1,2.50]}`)
	ms := []wire.Message{
		{Offset: 1, Payload: compact},
		{Offset: 2, Payload: []byte(`{ "a" : "\u00e9" }`)},
		{Offset: 3, Payload: []byte(`{"a":1}}`)},
		{Offset: 4, Payload: []byte("\"\xff\"")},
	}
	out := c.convert(ms, &counters)
	if len(out) != 2 || string(out[0].Payload) != string(compact) || &out[0].Payload[0] != &compact[0] || string(out[1].Payload) != `{"a":"é"}` {
		t.Fatalf("converted %+v", out)
	}
	if len(c.poison) != 2 || c.poison[0].msg.Offset != 3 || c.poison[0].stage != stageDecode || c.poison[1].msg.Offset != 4 {
		t.Fatalf("poison %+v", c.poison)
	}
	if got := c.poison[1].cause().Error(); got != "offset 4: decode: json: invalid UTF-8 at byte 1" {
		t.Fatalf("cause %q", got)
	}
	if got := c.poison[0].cause().Error(); !strings.HasPrefix(got, "offset 3: decode: json: ") {
		t.Fatalf("cause %q", got)
	}
}
