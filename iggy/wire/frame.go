package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/zeebo/xxh3"
)

// Frame sizes. Every frame is a 256-byte header followed by size-256 body bytes.
const (
	HeaderSize   = 256
	MaxFrameSize = 64 << 20 // 64 MiB, header included
)

// Command is the header-shape byte at offset 60.
type Command uint8

// Command values a client connection uses; 0..29 are defined, the rest are replica
// traffic a client never sees.
const (
	CommandRequest  Command = 5
	CommandReply    Command = 8
	CommandEviction Command = 13
	maxCommand      Command = 29
)

// String returns a readable name.
func (c Command) String() string {
	switch c {
	case CommandRequest:
		return "Request"
	case CommandReply:
		return "Reply"
	case CommandEviction:
		return "Eviction"
	}
	return fmt.Sprintf("Command(%d)", uint8(c))
}

// ClientID is the u128 client id of request headers: chosen by the client, non-zero,
// fresh for every login.
type ClientID = Uint128

// Header field offsets.
const (
	offSize       = 48
	offCommand    = 60
	offReqClient  = 128
	offReqCsum    = 144
	offReqTime    = 160
	offReqRequest = 168
	offReqOp      = 176
	offReqSession = 184
	offReqUser    = 192
	offReqCode    = 196
	offRepCsum    = 128
	offRepClient  = 160
	offRepTime    = 192
	offRepRequest = 200
	offRepOp      = 208
	offRepStatus  = 216
	offEvClient   = 128
	offEvMax      = 144
	offEvMin      = 148
	offEvReason   = 255
)

// FrameInfo is what the first 256 bytes of a frame say about the whole frame.
type FrameInfo struct {
	Size    uint32  // header + body
	Command Command // header shape
}

// BodyLen returns Size - HeaderSize.
func (f FrameInfo) BodyLen() int { return int(f.Size) - HeaderSize }

// ReadFrameInfo reads size and command from a frame's first HeaderSize bytes (hdr may be
// longer). It fails with ErrTruncated if hdr is short, ErrFrameSize if size is outside
// [HeaderSize, limit] (limit 0 means MaxFrameSize), and ErrUnknownCommand for a command byte
// above 29. Upstream tears the connection down on any of these.
func ReadFrameInfo(hdr []byte, limit uint32) (FrameInfo, error) {
	if len(hdr) < HeaderSize {
		return FrameInfo{}, fmt.Errorf("%w: frame header has %d bytes", ErrTruncated, len(hdr))
	}
	if limit == 0 {
		limit = MaxFrameSize
	}
	fi := FrameInfo{Size: binary.LittleEndian.Uint32(hdr[offSize:]), Command: Command(hdr[offCommand])}
	if fi.Size < HeaderSize || fi.Size > limit {
		return fi, fmt.Errorf("%w: size %d outside [%d, %d]", ErrFrameSize, fi.Size, HeaderSize, limit)
	}
	if fi.Command > maxCommand {
		return fi, fmt.Errorf("%w: %d", ErrUnknownCommand, fi.Command)
	}
	return fi, nil
}

// SetFrameSize writes len(frame) into the size field of the header that starts frame.
// Use it after appending a header and then a body to the same slice.
func SetFrameSize(frame []byte) {
	binary.LittleEndian.PutUint32(frame[offSize:], uint32(len(frame)))
}

// appendHeader appends a zeroed 256-byte header with size and command set and returns the
// extended slice and the header's bytes.
func appendHeader(dst []byte, cmd Command, bodyLen int) ([]byte, []byte) {
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	h := dst[start : start+HeaderSize]
	clear(h)
	binary.LittleEndian.PutUint32(h[offSize:], uint32(HeaderSize+bodyLen))
	h[offCommand] = byte(cmd)
	return dst, h
}

// RequestHeader is the client → server header. Fields not listed are zero on the
// wire (checksums, cluster, view, release, replica, user_id, reserved).
type RequestHeader struct {
	Client ClientID
	// RequestChecksum is 0 (unstamped) or XXH3-64 of the body in Lo; see
	// [StampRequestChecksum] and [VerifyRequestChecksum].
	RequestChecksum Uint128
	Timestamp       uint64 // informational; SDKs send 0
	Request         uint64 // request number
	Operation       Operation
	Session         uint64
	// Code is the command code; written (and read) only when Operation is OpNonReplicated.
	Code Code
}

// AppendRequestHeader appends h as a 256-byte header announcing a body of bodyLen bytes.
func AppendRequestHeader(dst []byte, h RequestHeader, bodyLen int) []byte {
	dst, b := appendHeader(dst, CommandRequest, bodyLen)
	putUint128(b[offReqClient:], h.Client)
	putUint128(b[offReqCsum:], h.RequestChecksum)
	binary.LittleEndian.PutUint64(b[offReqTime:], h.Timestamp)
	binary.LittleEndian.PutUint64(b[offReqRequest:], h.Request)
	b[offReqOp] = byte(h.Operation)
	binary.LittleEndian.PutUint64(b[offReqSession:], h.Session)
	if h.Operation == OpNonReplicated {
		binary.LittleEndian.PutUint32(b[offReqCode:], uint32(h.Code))
	}
	return dst
}

// AppendRequest appends a whole request frame: h, then r's body, with the size set.
// h.Operation and h.Code are taken from r.Code() ([Code.Operation]). It does not stamp
// the request checksum (see [StampRequestChecksum]).
func AppendRequest(dst []byte, h RequestHeader, r Request) []byte {
	start := len(dst)
	h.Code = r.Code()
	h.Operation = h.Code.Operation()
	dst = AppendRequestHeader(dst, h, 0)
	dst = r.Append(dst)
	SetFrameSize(dst[start:])
	return dst
}

// DecodeRequestHeader decodes the first HeaderSize bytes of hdr. It checks only the
// command byte (ErrUnexpectedCommand unless 5); apply [ValidateRequestHeader] next.
func DecodeRequestHeader(hdr []byte) (RequestHeader, error) {
	if len(hdr) < HeaderSize {
		return RequestHeader{}, fmt.Errorf("%w: request header has %d bytes", ErrTruncated, len(hdr))
	}
	if c := Command(hdr[offCommand]); c != CommandRequest {
		return RequestHeader{}, fmt.Errorf("%w: %s, want Request", ErrUnexpectedCommand, c)
	}
	h := RequestHeader{
		Client:          getUint128(hdr[offReqClient:]),
		RequestChecksum: getUint128(hdr[offReqCsum:]),
		Timestamp:       binary.LittleEndian.Uint64(hdr[offReqTime:]),
		Request:         binary.LittleEndian.Uint64(hdr[offReqRequest:]),
		Operation:       Operation(hdr[offReqOp]),
		Session:         binary.LittleEndian.Uint64(hdr[offReqSession:]),
	}
	if h.Operation == OpNonReplicated {
		h.Code = Code(binary.LittleEndian.Uint32(hdr[offReqCode:]))
	}
	return h, nil
}

// ValidateRequestHeader applies the request header rules: client ≠ 0; a known operation;
// Register needs session = 0 and request = 0; any operation other than Register and
// NonReplicated needs session > 0 and request > 0. A failure wraps ErrInvalidRequestHeader:
// upstream drops such a request with no reply (our server may do the same or answer).
func ValidateRequestHeader(h RequestHeader) error {
	switch {
	case h.Client.IsZero():
		return fmt.Errorf("%w: client id is 0", ErrInvalidRequestHeader)
	case !h.Operation.IsKnown():
		return fmt.Errorf("%w: unknown operation %d", ErrInvalidRequestHeader, h.Operation)
	case h.Operation == OpRegister && (h.Session != 0 || h.Request != 0):
		return fmt.Errorf("%w: Register with session %d, request %d", ErrInvalidRequestHeader, h.Session, h.Request)
	case h.Operation != OpRegister && h.Operation != OpNonReplicated && (h.Session == 0 || h.Request == 0):
		return fmt.Errorf("%w: %s with session %d, request %d", ErrInvalidRequestHeader, h.Operation, h.Session, h.Request)
	}
	return nil
}

// RequestChecksum returns the request_checksum value for body: XXH3-64 zero-extended.
func RequestChecksum(body []byte) Uint128 { return Uint128{Lo: xxh3.Hash(body)} }

// StampRequestChecksum writes RequestChecksum(body) into a complete request frame.
func StampRequestChecksum(frame []byte) {
	putUint128(frame[offReqCsum:], RequestChecksum(frame[HeaderSize:]))
}

// VerifyRequestChecksum checks a request's optional body stamp: 0 always passes, otherwise
// it must equal RequestChecksum(body). A mismatch returns ErrInvalidFormat (status 4).
func VerifyRequestChecksum(h RequestHeader, body []byte) error {
	if h.RequestChecksum.IsZero() || h.RequestChecksum == RequestChecksum(body) {
		return nil
	}
	return fmt.Errorf("wire: request checksum mismatch: %w", ErrInvalidFormat)
}

// ReplyHeader is the server → client header. Only Request, Operation and Status
// matter to a client; a server must echo Request and Operation exactly.
type ReplyHeader struct {
	RequestChecksum Uint128 // echo
	Client          ClientID
	Timestamp       uint64
	Request         uint64 // exact echo of the request number
	Operation       Operation
	Status          uint32 // 0 ok; else an error code with an empty body
}

// ReplyTo returns the reply header answering req with status.
func ReplyTo(req RequestHeader, status uint32) ReplyHeader {
	return ReplyHeader{
		RequestChecksum: req.RequestChecksum, Client: req.Client, Timestamp: req.Timestamp,
		Request: req.Request, Operation: req.Operation, Status: status,
	}
}

// AppendReplyHeader appends h as a 256-byte header announcing a body of bodyLen bytes.
func AppendReplyHeader(dst []byte, h ReplyHeader, bodyLen int) []byte {
	dst, b := appendHeader(dst, CommandReply, bodyLen)
	putUint128(b[offRepCsum:], h.RequestChecksum)
	putUint128(b[offRepClient:], h.Client)
	binary.LittleEndian.PutUint64(b[offRepTime:], h.Timestamp)
	binary.LittleEndian.PutUint64(b[offRepRequest:], h.Request)
	b[offRepOp] = byte(h.Operation)
	binary.LittleEndian.PutUint32(b[offRepStatus:], h.Status)
	return dst
}

// AppendReply appends a whole reply frame: h then body, with the size set.
func AppendReply(dst []byte, h ReplyHeader, body []byte) []byte {
	return append(AppendReplyHeader(dst, h, len(body)), body...)
}

// DecodeReplyHeader decodes the first HeaderSize bytes of hdr; ErrUnexpectedCommand unless
// the command byte is 8.
func DecodeReplyHeader(hdr []byte) (ReplyHeader, error) {
	if len(hdr) < HeaderSize {
		return ReplyHeader{}, fmt.Errorf("%w: reply header has %d bytes", ErrTruncated, len(hdr))
	}
	if c := Command(hdr[offCommand]); c != CommandReply {
		return ReplyHeader{}, fmt.Errorf("%w: %s, want Reply", ErrUnexpectedCommand, c)
	}
	return ReplyHeader{
		RequestChecksum: getUint128(hdr[offRepCsum:]),
		Client:          getUint128(hdr[offRepClient:]),
		Timestamp:       binary.LittleEndian.Uint64(hdr[offRepTime:]),
		Request:         binary.LittleEndian.Uint64(hdr[offRepRequest:]),
		Operation:       Operation(hdr[offRepOp]),
		Status:          binary.LittleEndian.Uint32(hdr[offRepStatus:]),
	}, nil
}

// EvictionHeader is the session-terminal server → client header; it has no body.
type EvictionHeader struct {
	Client ClientID // must be non-zero when sent
	// ServerMax and ServerMin are the packed accepted protocol versions, reason 14 only.
	ServerMax, ServerMin uint32
	Reason               EvictionReason
}

// AppendEvictionHeader appends h as a complete 256-byte Eviction frame. The version
// window is written only for reason 14 (upstream rejects it on any other reason).
func AppendEvictionHeader(dst []byte, h EvictionHeader) []byte {
	dst, b := appendHeader(dst, CommandEviction, 0)
	putUint128(b[offEvClient:], h.Client)
	if h.Reason == EvictionIncompatibleProtocol {
		binary.LittleEndian.PutUint32(b[offEvMax:], h.ServerMax)
		binary.LittleEndian.PutUint32(b[offEvMin:], h.ServerMin)
	}
	b[offEvReason] = byte(h.Reason)
	return dst
}

// DecodeEvictionHeader decodes the first HeaderSize bytes of hdr; ErrUnexpectedCommand
// unless the command byte is 13. It is lenient like a client must be: any reason byte is
// returned as is (see [EvictionReason.Error] for the mapping of invalid ones).
func DecodeEvictionHeader(hdr []byte) (EvictionHeader, error) {
	if len(hdr) < HeaderSize {
		return EvictionHeader{}, fmt.Errorf("%w: eviction header has %d bytes", ErrTruncated, len(hdr))
	}
	if c := Command(hdr[offCommand]); c != CommandEviction {
		return EvictionHeader{}, fmt.Errorf("%w: %s, want Eviction", ErrUnexpectedCommand, c)
	}
	return EvictionHeader{
		Client:    getUint128(hdr[offEvClient:]),
		ServerMax: binary.LittleEndian.Uint32(hdr[offEvMax:]),
		ServerMin: binary.LittleEndian.Uint32(hdr[offEvMin:]),
		Reason:    EvictionReason(hdr[offEvReason]),
	}, nil
}
