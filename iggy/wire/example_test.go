package wire_test

import (
	"errors"
	"fmt"

	"github.com/ferryio/ferry/iggy/wire"
)

// A client frames a request, and a server answers it; the client decodes the answer
// with the reply-decoding algorithm (DecodeReplyFrame).
func Example_requestReply() {
	// Client: CreateStream is a replicated op (128) with session and request > 0.
	h := wire.RequestHeader{Client: wire.Uint128{Lo: 42}, Session: 7, Request: 1}
	frame := wire.AppendRequest(nil, h, wire.CreateStreamRequest{Name: "orders"})

	// Server: read the size, decode and validate the header, decode the body.
	fi, _ := wire.ReadFrameInfo(frame, 0)
	rh, _ := wire.DecodeRequestHeader(frame)
	if err := wire.ValidateRequestHeader(rh); err != nil {
		return // upstream drops such a request silently
	}
	req, _ := wire.DecodeRequest(rh.CommandCode(), frame[wire.HeaderSize:fi.Size])
	fmt.Println(rh.Operation, req.(wire.CreateStreamRequest).Name)
	// The name exists already: a committed rejection in the result section.
	reply := wire.AppendRejectReply(nil, rh, wire.ErrStreamNameAlreadyExists.Code)

	// Client.
	_, _, err := wire.DecodeReplyFrame(reply[:wire.HeaderSize], reply[wire.HeaderSize:])
	fmt.Println(err, errors.Is(err, wire.ErrAlreadyExists))
	// Output:
	// CreateStream orders
	// iggy: StreamNameAlreadyExists (1012) true
}

// A producer builds a SendMessages body in a reused buffer; the server validates it,
// stamps it, and serves it in a poll reply, which the consumer decodes without copying.
func Example_messages() {
	msgs := []wire.SendMessage{
		{ID: wire.Uint128{Lo: 1}, OriginTimestamp: 1_700_000_000_000_000, Payload: []byte("hello")},
		{ID: wire.Uint128{Lo: 2}, OriginTimestamp: 1_700_000_000_000_500, Payload: []byte("world"),
			Headers: wire.AppendKVs(nil, []wire.KV{wire.StringKV("trace", wire.StringValue("t-1"))})},
	}
	body, err := wire.AppendSendMessages(nil, wire.NamedID("orders"), wire.NumericID(0), wire.ToPartition(0), msgs, nil)
	if err != nil {
		panic(err)
	}

	// Server: admission, then stamp at append.
	q, _ := wire.DecodeSendMessagesRequest(body)
	if _, err := q.Validate(); err != nil {
		panic(err)
	}
	stored := append([]byte(nil), q.Batch...)
	_ = wire.StampBatch(stored, 0, 10, 1_700_000_000_001_000)
	poll := wire.PollReply{PartitionID: 0, CurrentOffset: 11, MessagesCount: 2}.Append(nil)
	poll = append(poll, stored...)

	// Consumer.
	_, got, _ := wire.DecodePollReply(poll, nil)
	for _, m := range got {
		hdrs, _ := m.Headers(nil)
		fmt.Println(m.Offset, string(m.Payload), m.OriginTimestamp-1_700_000_000_000_000, len(hdrs))
	}
	// Output:
	// 10 hello 0 0
	// 11 world 500 1
}
