package wire

import "fmt"

// Request is the body of one command. Every XxxRequest type of this package implements
// it; [AppendRequest] frames one. Append assumes valid field values (names 1..255 bytes,
// and so on); [CheckRequest] verifies that by decoding the encoding.
type Request interface {
	// Code returns the command code; its Operation is the header's operation byte.
	Code() Code
	// Append appends the request body to dst.
	Append(dst []byte) []byte
}

type bodyDecoder func(body []byte) (Request, error)

func dec[T Request](f func([]byte) (T, error)) bodyDecoder {
	return func(b []byte) (Request, error) { return f(b) }
}

var requestDecoders = map[Code]bodyDecoder{
	CodePing:                 dec(DecodePingRequest),
	CodeGetStats:             dec(DecodeGetStatsRequest),
	CodeGetClusterMetadata:   dec(DecodeGetClusterMetadataRequest),
	CodeGetMe:                dec(DecodeGetMeRequest),
	CodeFlushUnsavedBuffer:   dec(DecodeFlushUnsavedBufferRequest),
	CodeLoginRegister:        dec(DecodeLoginPasswordRequest),
	CodeLoginRegisterWithPAT: dec(DecodeLoginPATRequest),
	CodeLogoutUser:           dec(DecodeLogoutRequest),
	CodeGetStream:            dec(DecodeGetStreamRequest),
	CodeGetStreams:           dec(DecodeGetStreamsRequest),
	CodeCreateStream:         dec(DecodeCreateStreamRequest),
	CodeDeleteStream:         dec(DecodeDeleteStreamRequest),
	CodeUpdateStream:         dec(DecodeUpdateStreamRequest),
	CodePurgeStream:          dec(DecodePurgeStreamRequest),
	CodeGetTopic:             dec(DecodeGetTopicRequest),
	CodeGetTopics:            dec(DecodeGetTopicsRequest),
	CodeCreateTopic:          dec(DecodeCreateTopicRequest),
	CodeDeleteTopic:          dec(DecodeDeleteTopicRequest),
	CodeUpdateTopic:          dec(DecodeUpdateTopicRequest),
	CodePurgeTopic:           dec(DecodePurgeTopicRequest),
	CodeCreatePartitions:     dec(DecodeCreatePartitionsRequest),
	CodeDeletePartitions:     dec(DecodeDeletePartitionsRequest),
	CodePollMessages:         dec(DecodePollMessagesRequest),
	CodeSendMessages:         dec(DecodeSendMessagesRequest),
	CodeGetConsumerOffset:    dec(DecodeGetConsumerOffsetRequest),
	CodeStoreConsumerOffset:  dec(DecodeStoreConsumerOffsetRequest),
	CodeDeleteConsumerOffset: dec(DecodeDeleteConsumerOffsetRequest),
	CodeGetConsumerGroup:     dec(DecodeGetConsumerGroupRequest),
	CodeGetConsumerGroups:    dec(DecodeGetConsumerGroupsRequest),
	CodeCreateConsumerGroup:  dec(DecodeCreateConsumerGroupRequest),
	CodeDeleteConsumerGroup:  dec(DecodeDeleteConsumerGroupRequest),
	CodeJoinConsumerGroup:    dec(DecodeJoinConsumerGroupRequest),
	CodeLeaveConsumerGroup:   dec(DecodeLeaveConsumerGroupRequest),
	CodeSyncConsumerGroup:    dec(DecodeSyncConsumerGroupRequest),
	CodeGetPATs:              dec(DecodeGetPATsRequest),
	CodeCreatePAT:            dec(DecodeCreatePATRequest),
	CodeDeletePAT:            dec(DecodeDeletePATRequest),
}

// ErrUnsupportedCode is returned by DecodeRequest for a code this package has no decoder
// for (users, snapshot, clients, segments, legacy logins). It matches ErrInvalidCommand.
var ErrUnsupportedCode error = &codecError{"wire: unsupported command code", ErrInvalidCommand}

// DecodeRequest decodes body as the request for code. For a Register (op 1) request the
// code is not on the wire: a server should use [DecodeLogin] instead. The returned value
// is the XxxRequest value type (not a pointer) of that code.
func DecodeRequest(code Code, body []byte) (Request, error) {
	d, ok := requestDecoders[code]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnsupportedCode, code)
	}
	req, err := d(body)
	if err != nil {
		return nil, fmt.Errorf("wire: decode %s: %w", code, err)
	}
	return req, nil
}

// CheckRequest encodes r and decodes the result, returning the decoder's error if r
// holds a value its encoding cannot carry (an empty or over-long name, a bad kind, …).
// A client calls it before sending to fail locally instead of on the server.
func CheckRequest(r Request) error {
	_, err := DecodeRequest(r.Code(), r.Append(nil))
	return err
}

// finish returns r's error, or ErrTrailingBytes if input remains, with context.
func finish(r *Reader, what string) error {
	if err := r.Complete(); err != nil {
		return fmt.Errorf("wire: %s: %w", what, err)
	}
	return nil
}

// finishLenient is finish for layouts whose decoder ignores trailing bytes.
func finishLenient(r *Reader, what string) error {
	if err := r.Err(); err != nil {
		return fmt.Errorf("wire: %s: %w", what, err)
	}
	return nil
}
