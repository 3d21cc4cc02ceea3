package wire

import (
	"errors"
	"fmt"
)

// ServerError is one Iggy error code. The package holds
// one value per known code (ErrStreamIDNotFound, …); [CodeError] returns it for a code
// read from a reply status or a result section. errors.Is matches two ServerErrors by
// Code, and matches an [ErrorClass] (ErrNotFound, ErrAlreadyExists, ErrInvalidInput,
// ErrLimitReached) the code belongs to.
type ServerError struct {
	Code  uint32
	Name  string
	class errClass
}

// Error names both the code and its name, e.g. "iggy: StreamIdNotFound (1009)".
func (e *ServerError) Error() string { return fmt.Sprintf("iggy: %s (%d)", e.Name, e.Code) }

// Is reports whether target is a ServerError with the same code, or an ErrorClass that
// contains this code.
func (e *ServerError) Is(target error) bool {
	switch t := target.(type) {
	case *ServerError:
		return t.Code == e.Code
	case *ErrorClass:
		c := e.class
		if known, ok := errorsByCode[e.Code]; ok {
			c = known.class // a ServerError built by hand still has its code's class
		}
		return c&t.bit != 0
	}
	return false
}

// ErrorClass groups error codes by the question a caller asks ("does it not exist?").
// Use it only through errors.Is.
type ErrorClass struct {
	bit  errClass
	name string
}

func (c *ErrorClass) Error() string { return "iggy: " + c.name }

type errClass uint8

const (
	classNotFound errClass = 1 << iota
	classAlreadyExists
	classInvalidInput
	classLimit
)

// Error classes. Unauthenticated (40) and unauthorized (41) are single codes: use
// ErrUnauthenticated and ErrUnauthorized.
var (
	// ErrNotFound matches codes 20, 1009, 2010, 3007, 3021, 5000, 5006.
	ErrNotFound = &ErrorClass{classNotFound, "not found"}
	// ErrAlreadyExists matches codes 46, 51, 1012, 2013, 5004.
	ErrAlreadyExists = &ErrorClass{classAlreadyExists, "already exists"}
	// ErrInvalidInput matches codes 3, 4, 6, 43, 44, 56, 1019, 2015, 2019, 4027, 4038,
	// 4039, 4041, 4042, 4100.
	ErrInvalidInput = &ErrorClass{classInvalidInput, "invalid input"}
	// ErrLimitReached matches codes 52, 1020, 2021, 3013.
	ErrLimitReached = &ErrorClass{classLimit, "limit reached"}
)

func newErr(code uint32, name string, class errClass) *ServerError {
	return &ServerError{Code: code, Name: name, class: class}
}

// One value per error code this protocol subset produces or a client must recognise.
var (
	ErrGeneric                        = newErr(1, "Error", 0)
	ErrInvalidCommand                 = newErr(3, "InvalidCommand", classInvalidInput)
	ErrInvalidFormat                  = newErr(4, "InvalidFormat", classInvalidInput)
	ErrFeatureUnavailable             = newErr(5, "FeatureUnavailable", 0)
	ErrInvalidIdentifier              = newErr(6, "InvalidIdentifier", classInvalidInput)
	ErrResourceNotFound               = newErr(20, "ResourceNotFound", classNotFound)
	ErrStaleClient                    = newErr(30, "StaleClient", 0)
	ErrUnauthenticated                = newErr(40, "Unauthenticated", 0)
	ErrUnauthorized                   = newErr(41, "Unauthorized", 0)
	ErrInvalidCredentials             = newErr(42, "InvalidCredentials", 0)
	ErrInvalidUsername                = newErr(43, "InvalidUsername", classInvalidInput)
	ErrInvalidPassword                = newErr(44, "InvalidPassword", classInvalidInput)
	ErrUserAlreadyExists              = newErr(46, "UserAlreadyExists", classAlreadyExists)
	ErrPATAlreadyExists               = newErr(51, "PersonalAccessTokenAlreadyExists", classAlreadyExists)
	ErrPATLimitReached                = newErr(52, "PersonalAccessTokensLimitReached", classLimit)
	ErrInvalidPAT                     = newErr(53, "InvalidPersonalAccessToken", 0)
	ErrInvalidPATExpiry               = newErr(56, "InvalidPersonalAccessTokenExpiry", classInvalidInput)
	ErrTransientNotCommitted          = newErr(57, "TransientNotCommitted", 0)
	ErrTransientNotAccepted           = newErr(58, "TransientNotAccepted", 0)
	ErrRequestAlreadyApplied          = newErr(59, "RequestAlreadyApplied", 0)
	ErrStreamIDNotFound               = newErr(1009, "StreamIdNotFound", classNotFound)
	ErrStreamNameAlreadyExists        = newErr(1012, "StreamNameAlreadyExists", classAlreadyExists)
	ErrInvalidTopicSize               = newErr(1019, "InvalidTopicSize", classInvalidInput)
	ErrTooManyStreams                 = newErr(1020, "TooManyStreams", classLimit)
	ErrTopicIDNotFound                = newErr(2010, "TopicIdNotFound", classNotFound)
	ErrTopicNameAlreadyExists         = newErr(2013, "TopicNameAlreadyExists", classAlreadyExists)
	ErrTooManyPartitions              = newErr(2015, "TooManyPartitions", classInvalidInput)
	ErrInvalidPartitionsCount         = newErr(2019, "InvalidPartitionsCount", classInvalidInput)
	ErrTooManyTopics                  = newErr(2021, "TooManyTopics", classLimit)
	ErrPartitionNotFound              = newErr(3007, "PartitionNotFound", classNotFound)
	ErrPartitionIDSpaceExhausted      = newErr(3013, "PartitionIdSpaceExhausted", classLimit)
	ErrConsumerOffsetNotFound         = newErr(3021, "ConsumerOffsetNotFound", classNotFound)
	ErrInvalidMessageChecksum         = newErr(4027, "InvalidMessageChecksum", classInvalidInput)
	ErrInvalidMessageTimestampDelta   = newErr(4038, "InvalidMessageTimestampDelta", classInvalidInput)
	ErrInvalidBatchChecksum           = newErr(4039, "InvalidBatchChecksum", classInvalidInput)
	ErrCannotSaveMessagesToSegment    = newErr(4006, "CannotSaveMessagesToSegment", 0)
	ErrUnsupportedOptionKey           = newErr(4041, "UnsupportedOptionKey", classInvalidInput)
	ErrInvalidOptionValue             = newErr(4042, "InvalidOptionValue", classInvalidInput)
	ErrInvalidOffset                  = newErr(4100, "InvalidOffset", classInvalidInput)
	ErrConsumerGroupIDNotFound        = newErr(5000, "ConsumerGroupIdNotFound", classNotFound)
	ErrConsumerGroupNameAlreadyExists = newErr(5004, "ConsumerGroupNameAlreadyExists", classAlreadyExists)
	ErrConsumerGroupMemberNotFound    = newErr(5006, "ConsumerGroupMemberNotFound", classNotFound)
	ErrConsumerGroupPartitionNotOwned = newErr(5009, "ConsumerGroupPartitionNotOwned", 0)
	ErrIncompatibleProtocolVersion    = newErr(14003, "IncompatibleProtocolVersion", 0)
)

// ServerErrors lists every known error value in code order (the single table the
// package's lookups are built from).
var ServerErrors = []*ServerError{
	ErrGeneric, ErrInvalidCommand, ErrInvalidFormat, ErrFeatureUnavailable,
	ErrInvalidIdentifier, ErrResourceNotFound, ErrStaleClient, ErrUnauthenticated,
	ErrUnauthorized, ErrInvalidCredentials, ErrInvalidUsername, ErrInvalidPassword,
	ErrUserAlreadyExists, ErrPATAlreadyExists, ErrPATLimitReached, ErrInvalidPAT,
	ErrInvalidPATExpiry, ErrTransientNotCommitted, ErrTransientNotAccepted,
	ErrRequestAlreadyApplied, ErrStreamIDNotFound, ErrStreamNameAlreadyExists,
	ErrInvalidTopicSize, ErrTooManyStreams, ErrTopicIDNotFound, ErrTopicNameAlreadyExists,
	ErrTooManyPartitions, ErrInvalidPartitionsCount, ErrTooManyTopics, ErrPartitionNotFound,
	ErrPartitionIDSpaceExhausted, ErrConsumerOffsetNotFound, ErrCannotSaveMessagesToSegment, ErrInvalidMessageChecksum,
	ErrInvalidMessageTimestampDelta, ErrInvalidBatchChecksum, ErrUnsupportedOptionKey,
	ErrInvalidOptionValue, ErrInvalidOffset, ErrConsumerGroupIDNotFound,
	ErrConsumerGroupNameAlreadyExists, ErrConsumerGroupMemberNotFound,
	ErrConsumerGroupPartitionNotOwned, ErrIncompatibleProtocolVersion,
}

var errorsByCode = func() map[uint32]*ServerError {
	m := make(map[uint32]*ServerError, len(ServerErrors))
	for _, e := range ServerErrors {
		m[e.Code] = e
	}
	return m
}()

// CodeError returns the error for a non-zero status or result code: the package's value
// for a known code, otherwise a new *ServerError named "Unknown". It returns nil for 0.
func CodeError(code uint32) error {
	if code == 0 {
		return nil
	}
	if e, ok := errorsByCode[code]; ok {
		return e
	}
	return &ServerError{Code: code, Name: "Unknown"}
}

// ErrorCode returns the code a server should answer for err: the code of a *ServerError
// in its chain, 3 (InvalidCommand) for ErrMalformed, 0 for nil, and 1 otherwise.
func ErrorCode(err error) uint32 {
	if err == nil {
		return 0
	}
	var se *ServerError
	if errors.As(err, &se) {
		return se.Code
	}
	if errors.Is(err, ErrMalformed) {
		return ErrInvalidCommand.Code
	}
	return ErrGeneric.Code
}

// Retriable reports whether err carries code 57 (TransientNotCommitted: resend the
// identical request, same request number, on the same connection) or 58
// (TransientNotAccepted: not executed, safe to resend anywhere).
func Retriable(err error) bool {
	return errors.Is(err, ErrTransientNotCommitted) || errors.Is(err, ErrTransientNotAccepted)
}

// codecError is a sentinel with a parent, so specific faults also match ErrMalformed.
type codecError struct {
	msg    string
	parent error
}

func (e *codecError) Error() string { return e.msg }
func (e *codecError) Unwrap() error { return e.parent }

// Codec errors. Every decoding failure matches ErrMalformed (a server answers it with
// status 3, see [ErrorCode]); the more specific sentinels below match it too.
var (
	// ErrMalformed is matched by every error a decoder returns for bad input.
	ErrMalformed = errors.New("wire: malformed input")
	// ErrTruncated: the input ended before a field (or a declared count) was complete.
	ErrTruncated error = &codecError{"wire: truncated input", ErrMalformed}
	// ErrTrailingBytes: the input has bytes after the last field of a fixed layout.
	ErrTrailingBytes error = &codecError{"wire: trailing bytes", ErrMalformed}
	// ErrFrameSize: a frame's size field is outside [HeaderSize, max].
	ErrFrameSize error = &codecError{"wire: frame size out of range", ErrMalformed}
	// ErrUnknownCommand: a header's command byte is not a defined value (> 29).
	ErrUnknownCommand error = &codecError{"wire: unknown header command", ErrMalformed}
	// ErrUnexpectedCommand: a header is valid but not of the kind being decoded (e.g. a
	// Reply where a Request was expected).
	ErrUnexpectedCommand error = &codecError{"wire: unexpected header command", ErrMalformed}
	// ErrInvalidRequestHeader: a request header breaks a rule of ValidateRequestHeader. Upstream drops such
	// a request silently (no reply, connection kept).
	ErrInvalidRequestHeader error = &codecError{"wire: invalid request header", ErrMalformed}
)
