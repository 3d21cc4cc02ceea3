package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// TestRequestRoundTrip encodes every sample request, decodes it with DecodeRequest and
// checks the value and the bytes survive exactly.
func TestRequestRoundTrip(t *testing.T) {
	for _, req := range sampleRequests() {
		t.Run(req.Code().String(), func(t *testing.T) {
			body := req.Append(nil)
			got, err := DecodeRequest(req.Code(), body)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, req) {
				t.Fatalf("round trip\n got %#v\nwant %#v", got, req)
			}
			if again := got.Append(nil); !bytes.Equal(again, body) {
				t.Fatalf("re-encoding differs")
			}
			if err := CheckRequest(req); err != nil {
				t.Fatal(err)
			}
			// Every strict decoder rejects a truncated body.
			if len(body) > 0 && req.Code() != CodeSendMessages {
				if _, err := DecodeRequest(req.Code(), body[:len(body)-1]); err == nil {
					t.Fatalf("truncated body accepted")
				}
			}
		})
	}
}

func TestReplyRoundTrip(t *testing.T) {
	for _, rc := range sampleReplies() {
		t.Run(rc.name, func(t *testing.T) {
			got, err := rc.dec(rc.enc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, rc.enc) {
				t.Fatalf("re-encoding differs\n got %x\nwant %x", got, rc.enc)
			}
			if _, err := rc.dec(rc.enc[:len(rc.enc)-1]); err == nil {
				t.Fatal("truncated payload accepted")
			}
			if _, err := rc.dec(append(rc.enc[:len(rc.enc):len(rc.enc)], 0)); rc.name != "Streams" && rc.name != "Groups" && rc.name != "PATs" && err == nil {
				t.Fatal("trailing byte accepted")
			}
		})
	}
}

func TestEmptyPayloadMeansNotFound(t *testing.T) {
	if _, found, err := DecodeStreamDetails(nil); found || err != nil {
		t.Error("stream")
	}
	if _, found, err := DecodeTopicDetails(nil); found || err != nil {
		t.Error("topic")
	}
	if _, found, err := DecodeGroupDetails(nil); found || err != nil {
		t.Error("group")
	}
	if _, found, err := DecodeConsumerOffsetInfo(nil); found || err != nil {
		t.Error("offset")
	}
	if _, found, err := DecodeSyncAssignment(nil); found || err != nil {
		t.Error("sync")
	}
	if s, err := DecodeStreams(nil); s != nil || err != nil {
		t.Error("streams")
	}
	if r, err := DecodeSendMessagesReply(nil); len(r.Confirmations) != 0 || err != nil {
		t.Error("send reply")
	}
}

func TestRequestCodesAndOps(t *testing.T) {
	for _, tc := range []struct {
		code Code
		op   Operation
	}{
		{CodePing, OpNonReplicated}, {CodePollMessages, OpNonReplicated}, {CodeSyncConsumerGroup, OpNonReplicated},
		{CodeLoginRegister, OpRegister}, {CodeLoginRegisterWithPAT, OpRegister}, {CodeLogoutUser, OpLogout},
		{CodeCreateStream, 128}, {CodeUpdateStream, 129}, {CodeDeleteStream, 130}, {CodePurgeStream, 131},
		{CodeCreateTopic, 132}, {CodeUpdateTopic, 133}, {CodeDeleteTopic, 134}, {CodePurgeTopic, 135},
		{CodeCreatePartitions, 136}, {CodeDeletePartitions, 137}, {CodeDeleteSegments, 138},
		{CodeCreateConsumerGroup, 139}, {CodeDeleteConsumerGroup, 140}, {CodeCreateUser, 141},
		{CodeCreatePAT, 146}, {CodeDeletePAT, 147}, {CodeJoinConsumerGroup, 148}, {CodeLeaveConsumerGroup, 149},
		{CodeSendMessages, 160}, {CodeStoreConsumerOffset, 161}, {CodeDeleteConsumerOffset, 162},
		{CodeLoginUser, OpReserved}, {CodeLoginWithPAT, OpReserved}, {9999, OpReserved},
	} {
		if got := tc.code.Operation(); got != tc.op {
			t.Errorf("%s.Operation() = %d, want %d", tc.code, got, tc.op)
		}
		if tc.op >= 128 && tc.op.Code() != tc.code {
			t.Errorf("Operation(%d).Code() = %s", tc.op, tc.op.Code())
		}
	}
	nonRep := []Code{1, 10, 11, 12, 13, 20, 21, 22, 31, 32, 41, 100, 102, 120, 200, 201, 300, 301, 600, 601, 606}
	n := 0
	for c := range codes {
		if c.IsNonReplicated() {
			n++
		}
	}
	for _, c := range nonRep {
		if !c.IsNonReplicated() {
			t.Errorf("%s not op 2", c)
		}
	}
	if n != len(nonRep) || len(codes) != 51 {
		t.Errorf("%d op-2 codes of %d", n, len(codes))
	}
	for op := range 256 {
		o := Operation(op)
		want := o == 1 || (o >= 64 && o <= 68) || (o >= 128 && o <= 149 && o != 138) || o == 161 || o == 162
		if IsResultFramed(o) != want {
			t.Errorf("IsResultFramed(%d) = %v", op, !want)
		}
	}
	if _, err := DecodeRequest(CodeGetUsers, nil); !errors.Is(err, ErrUnsupportedCode) || !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("unsupported: %v", err)
	}
	if err := CheckRequest(CreateStreamRequest{Name: ""}); !errors.Is(err, ErrMalformed) {
		t.Errorf("empty name: %v", err)
	}
}

func TestOptionsRules(t *testing.T) {
	good := AppendKVs(nil, opts)
	if kvs, err := DecodeOptions(good); err != nil || len(kvs) != 2 {
		t.Fatalf("%v %v", kvs, err)
	}
	for name, block := range map[string][]byte{
		"dup key":      AppendKVs(nil, []KV{opts[0], opts[0]}),
		"raw key":      AppendKVs(nil, []KV{{Key: RawValue([]byte("k")), Value: BoolValue(true)}}),
		"kind 0":       AppendKVs(nil, []KV{{Key: StringValue("k"), Value: HeaderValue{0, []byte{1}}}}),
		"empty value":  AppendKVs(nil, []KV{{Key: StringValue("k"), Value: HeaderValue{KindRaw, nil}}}),
		"odd TLVs":     appendTLV(nil, StringValue("k")),
		"long value":   AppendKVs(nil, []KV{{Key: StringValue("k"), Value: RawValue(make([]byte, 256))}}),
		"partial tail": good[:len(good)-1],
	} {
		if _, err := DecodeOptions(block); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	many := make([]KV, MaxOptionPairs+1)
	for i := range many {
		many[i] = StringKV(string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)), BoolValue(true))
	}
	if _, err := DecodeOptions(AppendKVs(nil, many)); !errors.Is(err, ErrMalformed) {
		t.Errorf("too many: %v", err)
	}
}

func TestTypedHeaders(t *testing.T) {
	kvs := []KV{
		StringKV("s", StringValue("v")), StringKV("b", BoolValue(true)), StringKV("i", Int64Value(-5)),
		StringKV("u8", Uint8Value(7)), StringKV("u32", Uint32Value(1<<20)), StringKV("u64", Uint64Value(1<<40)),
		StringKV("f", Float64Value(2.5)), {Key: RawValue([]byte{0xff}), Value: RawValue([]byte{1, 2})},
	}
	block := AppendKVs(nil, kvs)
	if len(block) != KVsSize(kvs) {
		t.Fatalf("size %d vs %d", len(block), KVsSize(kvs))
	}
	got, err := DecodeKVs(block, nil)
	if err != nil || !reflect.DeepEqual(got, kvs) {
		t.Fatalf("%v %v", got, err)
	}
	v, _ := LookupKV(got, "u32")
	if n, err := v.AsUint64(); n != 1<<20 || err != nil {
		t.Errorf("u32 %d %v", n, err)
	}
	v, _ = LookupKV(got, "i")
	if n, err := v.AsInt64(); n != -5 || err != nil {
		t.Errorf("i %d %v", n, err)
	}
	v, _ = LookupKV(got, "f")
	if f, err := v.AsFloat64(); f != 2.5 || err != nil {
		t.Errorf("f %v %v", f, err)
	}
	v, _ = LookupKV(got, "b")
	if b, err := v.AsBool(); !b || err != nil {
		t.Errorf("b %v %v", b, err)
	}
	if _, err := v.AsUint64(); !errors.Is(err, ErrMalformed) {
		t.Errorf("bool as uint: %v", err)
	}
	// Typed rules: kind > 15, wrong fixed width, bool 2.
	for _, bad := range [][]byte{
		AppendKVs(nil, []KV{StringKV("k", HeaderValue{16, []byte{1}})}),
		AppendKVs(nil, []KV{StringKV("k", HeaderValue{KindUint64, []byte{1}})}),
		AppendKVs(nil, []KV{StringKV("k", HeaderValue{KindBool, []byte{2}})}),
		AppendKVs(nil, []KV{StringKV("k", HeaderValue{KindString, []byte{0xff}})}),
	} {
		if _, err := DecodeKVs(bad, nil); !errors.Is(err, ErrMalformed) {
			t.Errorf("%x: %v", bad, err)
		}
	}
}
