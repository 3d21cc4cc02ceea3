package postcard

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// varintEdges are 0, 1 and 2^k-1, 2^k, 2^k+1 for every k (where they fit in 64 bits).
func varintEdges() []uint64 {
	vs := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1}
	for k := 1; k < 64; k++ {
		p := uint64(1) << k
		vs = append(vs, p-1, p, p+1)
	}
	return vs
}

// The put writers give exactly the bytes of the append encoders, for every varint length,
// and write nothing before i or past i+putSlack.
func TestPutMatchesAppend(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	vs := varintEdges()
	for range 2000 {
		vs = append(vs, rng.Uint64()>>rng.IntN(64))
	}
	check := func(t *testing.T, want []byte, put func(b []byte, i int) int) {
		t.Helper()
		const at = 3
		b := bytes.Repeat([]byte{0xAA}, at+maxU128Len+putSlack+4)
		end := put(b[:at+len(want)+putSlack], at)
		if end != at+len(want) || !bytes.Equal(b[at:end], want) {
			t.Fatalf("put = % x (end %d), want % x", b[at:end], end, want)
		}
		if !bytes.Equal(b[:at], []byte{0xAA, 0xAA, 0xAA}) || b[at+len(want)+putSlack] != 0xAA {
			t.Fatalf("put wrote outside its room: % x", b)
		}
	}
	for _, v := range vs {
		check(t, AppendUvarint(nil, v), func(b []byte, i int) int { return putUvarint(b, i, v) })
		check(t, AppendU128(nil, v, 0), func(b []byte, i int) int { return putU128(b, i, v, 0) })
		for _, hi := range vs[:40] {
			check(t, AppendU128(nil, v, hi), func(b []byte, i int) int { return putU128(b, i, v, hi) })
		}
		hi := rng.Uint64() >> rng.IntN(64)
		check(t, AppendU128(nil, v, hi), func(b []byte, i int) int { return putU128(b, i, v, hi) })
	}
}

// appendRawMessagesRef is the plain append-based encoding AppendRawMessages must match.
func appendRawMessagesRef(dst []byte, si uint32, msgs []sdk.ConsumedMessage) []byte {
	var e Encoder
	dst = AppendUvarint(dst, uint64(si))
	dst = AppendUvarint(dst, uint64(len(msgs)))
	for _, m := range msgs {
		lo, hi := m.ID.Halves()
		dst = AppendU128(dst, lo, hi)
		for _, v := range []uint64{m.Offset, m.Checksum, m.Timestamp, m.OriginTimestamp} {
			dst = AppendUvarint(dst, v)
		}
		if len(m.Headers) == 0 {
			dst = append(dst, 0)
		} else {
			hm, _ := e.AppendHeaderMap(nil, m.Headers)
			dst = AppendBytes(dst, hm)
		}
		dst = AppendBytes(dst, m.Payload)
	}
	return dst
}

// AppendRawMessages writes in place after dst's bytes, leaves them alone, and gives the
// reference bytes for random ids, numbers, payload sizes and header maps (including
// unsorted ones with duplicate keys), into fresh, reused and too-small buffers.
func TestAppendRawMessagesInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	edges := varintEdges()
	num := func() uint64 {
		if rng.IntN(2) == 0 {
			return edges[rng.IntN(len(edges))]
		}
		return rng.Uint64() >> rng.IntN(64)
	}
	hdrs := [][]sdk.Header{nil, {}, mapKVN,
		{{Key: sdk.String("z"), Value: sdk.Uint64(1)}, {Key: sdk.String("a"), Value: sdk.String(string(make([]byte, 300)))},
			{Key: sdk.String("z"), Value: sdk.HeaderField{Kind: sdk.HeaderRaw, Value: []byte{1, 2, 3}}}}}
	var e Encoder
	var reused []byte
	for round := range 50 {
		msgs := make([]sdk.ConsumedMessage, rng.IntN(300))
		for i := range msgs {
			var id sdk.MessageID
			lo, hi := num(), num()
			for j := range 8 {
				id[j], id[8+j] = byte(lo>>(8*j)), byte(hi>>(8*j))
			}
			msgs[i] = sdk.ConsumedMessage{ID: id, Offset: num(), Checksum: num(), Timestamp: num(), OriginTimestamp: num(),
				Headers: hdrs[rng.IntN(len(hdrs))], Payload: make([]byte, rng.IntN(200))}
			for j := range msgs[i].Payload {
				msgs[i].Payload[j] = byte(rng.Uint32())
			}
		}
		prefix := []byte{0xF0, 0x0F, byte(round)}
		want := appendRawMessagesRef(bytes.Clone(prefix), 1, msgs)
		for name, dst := range map[string][]byte{
			"fresh":     bytes.Clone(prefix),
			"reused":    append(reused[:0], prefix...),
			"too small": append(make([]byte, 0, 4), prefix...),
		} {
			got, err := e.AppendRawMessages(dst, sdk.SchemaRaw, msgs)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("round %d %s: err %v\n got % x\nwant % x", round, name, err, got, want)
			}
			if name == "reused" {
				reused = got
			}
		}
	}
}

// A bad header kind is reported before anything is written.
func TestAppendRawMessagesErrorLeavesDst(t *testing.T) {
	var e Encoder
	dst := make([]byte, 2, 64)
	dst[0], dst[1] = 7, 8
	msgs := []sdk.ConsumedMessage{{Payload: []byte("ok")}, {Headers: []sdk.Header{{Key: sdk.HeaderField{Kind: 16}, Value: sdk.String("v")}}}}
	got, err := e.AppendRawMessages(dst, sdk.SchemaRaw, msgs)
	if !errors.Is(err, ErrUnknownVariant) || !bytes.Equal(got, []byte{7, 8}) || !bytes.Equal(dst[:3], []byte{7, 8, 0}) {
		t.Fatalf("got % x, err %v; dst % x", got, err, dst[:3])
	}
}

// BenchmarkAppendRawMessages compares, in one run, the in-place encoder with the plain
// append-based reference for 1000 × 100-byte messages with random ids and checksums. The
// two alternate batch by batch (the machine may be loaded); each reports its fastest and
// median batch in ns per message.
func BenchmarkAppendRawMessages(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	payload := bytes.Repeat([]byte("abcdefghij"), 10)
	msgs := make([]sdk.ConsumedMessage, 1000)
	for i := range msgs {
		var id sdk.MessageID
		for j := range id {
			id[j] = byte(rng.Uint32())
		}
		msgs[i] = sdk.ConsumedMessage{ID: id, Offset: 1_000_000 + uint64(i), Checksum: rng.Uint64(),
			Timestamp: 1_764_000_000_000_000 + uint64(i), OriginTimestamp: 1_764_000_000_000_000 + uint64(i), Payload: payload}
	}
	var e Encoder
	var bufA, bufB []byte
	var inPlace, ref []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		bufA, _ = e.AppendRawMessages(bufA[:0], sdk.SchemaRaw, msgs)
		t1 := time.Now()
		bufB = appendRawMessagesRef(bufB[:0], 1, msgs)
		t2 := time.Now()
		inPlace, ref = append(inPlace, t1.Sub(t0)), append(ref, t2.Sub(t1))
	}
	if !bytes.Equal(bufA, bufB) {
		b.Fatal("encodings differ")
	}
	perMsg := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(len(msgs)) }
	slices.Sort(inPlace)
	slices.Sort(ref)
	b.ReportMetric(perMsg(inPlace[0]), "min-ns/msg")
	b.ReportMetric(perMsg(inPlace[len(inPlace)/2]), "median-ns/msg")
	b.ReportMetric(perMsg(ref[0]), "ref-min-ns/msg")
	b.ReportMetric(perMsg(ref[len(ref)/2]), "ref-median-ns/msg")
}
