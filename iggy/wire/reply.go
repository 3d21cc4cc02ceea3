package wire

// Whole-reply helpers: the client's reply-decoding algorithm in one call, and the
// server's three reply shapes (success, status denial, committed rejection).

import "fmt"

// CommandCode returns the command a request header names: the code at offset 196 for
// OpNonReplicated, the operation's code for replicated ops and Logout, and 0 for Register
// (use [DecodeLogin]) and unknown operations.
func (h RequestHeader) CommandCode() Code {
	if h.Operation == OpNonReplicated {
		return h.Code
	}
	return h.Operation.Code()
}

// DecodeReplyFrame applies the client's reply algorithm to one frame given as its
// 256-byte header and its body: an Eviction becomes an *EvictionError; a command other
// than Reply is ErrUnexpectedCommand; a non-zero status or a rejecting result section
// becomes the code's error ([CodeError]); otherwise it returns the header and the command
// payload (a sub-slice of body). A caller should also compare h.Request with the request
// number it sent and drop the connection on a mismatch.
func DecodeReplyFrame(hdr, body []byte) (ReplyHeader, []byte, error) {
	fi, err := ReadFrameInfo(hdr, 0)
	if err != nil {
		return ReplyHeader{}, nil, err
	}
	if fi.Command == CommandEviction {
		ev, err := DecodeEvictionHeader(hdr)
		if err != nil {
			return ReplyHeader{}, nil, err
		}
		return ReplyHeader{}, nil, NewEvictionError(ev)
	}
	if fi.BodyLen() != len(body) {
		return ReplyHeader{}, nil, fmt.Errorf("%w: header announces %d body bytes, got %d", ErrFrameSize, fi.BodyLen(), len(body))
	}
	h, err := DecodeReplyHeader(hdr)
	if err != nil {
		return ReplyHeader{}, nil, err
	}
	p, err := ReplyPayload(h, body)
	return h, p, err
}

// committedReplyTo is ReplyTo for a committed reply (success or result-section
// rejection): it carries the committed form of req's operation, as a real server's does
// (CreateTopic is answered as CreateTopicWithAssignments; see replyForms).
func committedReplyTo(req RequestHeader) ReplyHeader {
	h := ReplyTo(req, 0)
	h.Operation = req.Operation.CommittedForm()
	return h
}

// AppendReplyPrefix starts a success reply to req: the reply header (status 0, size to be
// fixed, the committed form of req's operation) and, when that operation is
// result-framed, the success result section. The caller appends the payload and then
// calls SetFrameSize(dst[start:]), where start is len(dst) before this call.
func AppendReplyPrefix(dst []byte, req RequestHeader) []byte {
	h := committedReplyTo(req)
	dst = AppendReplyHeader(dst, h, 0)
	if IsResultFramed(h.Operation) {
		dst = AppendResultOK(dst)
	}
	return dst
}

// AppendOKReply appends a complete success reply to req carrying payload (nil for none),
// under the committed form of req's operation, with the result section when that
// operation needs one.
func AppendOKReply(dst []byte, req RequestHeader, payload []byte) []byte {
	start := len(dst)
	dst = append(AppendReplyPrefix(dst, req), payload...)
	SetFrameSize(dst[start:])
	return dst
}

// AppendStatusReply appends a denial before execution: header status = code, empty body,
// req's own operation echoed (nothing was committed).
func AppendStatusReply(dst []byte, req RequestHeader, code uint32) []byte {
	return AppendReplyHeader(dst, ReplyTo(req, code), 0)
}

// AppendRejectReply appends a committed rejection (R:code): status 0, the committed form
// of req's operation and a result section [1][0][code] with no payload. Use it only for
// operations whose committed form is result-framed; for the others it falls back to
// AppendStatusReply.
func AppendRejectReply(dst []byte, req RequestHeader, code uint32) []byte {
	h := committedReplyTo(req)
	if !IsResultFramed(h.Operation) {
		return AppendStatusReply(dst, req, code)
	}
	return AppendReply(dst, h, AppendResultError(make([]byte, 0, 12), code))
}
