package connect

import (
	"fmt"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// benchWireBatch is one polled batch of n messages with payload(i) and one user header.
func benchWireBatch(n int, payload func(i int) []byte) []wire.Message {
	ms := make([]wire.Message, n)
	hdr := wire.AppendKVs(nil, []wire.KV{wire.StringKV("trace", wire.StringValue("abc"))})
	for i := range ms {
		ms[i] = wire.Message{ID: wire.Uint128{Lo: uint64(i)}, Offset: uint64(i), Payload: payload(i), RawHeaders: hdr}
	}
	return ms
}

// BenchmarkConvertRaw is the converter on a raw stream without transforms (the zero-copy
// path: payloads alias the poll buffer), one op = one batch of 1000 messages of 100 bytes.
// Compare it with the same benchmark on the previous commit (docs/benchmarks.md).
func BenchmarkConvertRaw(b *testing.B) {
	payload := make([]byte, 100)
	ms := benchWireBatch(1000, func(int) []byte { return payload })
	var c converter
	var counters Counters
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if out := c.convert(ms, &counters); len(out) != len(ms) {
			b.Fatal(len(out))
		}
	}
	b.ReportMetric(float64(b.N)*float64(len(ms))/b.Elapsed().Seconds(), "msgs/s")
}

// benchJSON is a 200-byte JSON object (message i).
func benchJSON(i int) []byte {
	p := fmt.Appendf(nil, `{"id":%d,"user":"user-%06d","email":"someone@example.com","amount":1234.50,"currency":"EUR","tags":["a","b","c"],"active":true,"password":"hunter2","note":"`, i, i%1000000)
	for len(p) < 198 {
		p = append(p, 'x')
	}
	return append(p, `"}`...)
}

// BenchmarkConvertJSONTransforms is the converter on a json stream with two transforms
// (add_fields with a static value, delete_fields), 200-byte objects: decode, transform,
// re-encode. One op = one message; goal ≥ 400k msgs/s on one core (-cpu 1).
func BenchmarkConvertJSONTransforms(b *testing.B) {
	const batch = 1000
	ms := benchWireBatch(batch, benchJSON)
	if len(ms[0].Payload) != 200 {
		b.Fatalf("payload is %d bytes", len(ms[0].Payload))
	}
	ts := []config.Transform{
		{Type: "add_fields", Enabled: true, Config: map[string]any{"enabled": true,
			"fields": []any{map[string]any{"key": "source", "value": map[string]any{"static": "ferry"}}}}},
		{Type: "delete_fields", Enabled: true, Config: map[string]any{"enabled": true, "fields": []any{"password"}}},
	}
	pipe, err := newPayloadPipeline(sdk.SchemaJSON, "", ts)
	if err != nil {
		b.Fatal(err)
	}
	c := converter{pipe: pipe}
	var counters Counters
	if out := c.convert(ms, &counters); len(out) != batch || string(out[0].Payload[len(out[0].Payload)-18:]) != `,"source":"ferry"}` {
		b.Fatalf("converted %d, first %s", len(out), out[0].Payload)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		out := c.convert(ms, &counters)
		n += len(out)
	}
	b.StopTimer()
	// One op is one message: scale what the framework measured per loop to per message.
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkConvertJSON is the converter on a json stream without transforms, 200-byte
// compact objects: each payload checked (UTF-8, JSON) and handed on as polled. One op =
// one message.
func BenchmarkConvertJSON(b *testing.B) {
	const batch = 1000
	ms := benchWireBatch(batch, benchJSON)
	pipe, err := newPayloadPipeline(sdk.SchemaJSON, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	c := converter{pipe: pipe}
	var counters Counters
	if out := c.convert(ms, &counters); len(out) != batch || string(out[7].Payload) != string(ms[7].Payload) {
		b.Fatalf("converted %d, first %s", len(out), out[0].Payload)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		out := c.convert(ms, &counters)
		n += len(out)
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}
