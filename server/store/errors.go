package store

import "errors"

// Sentinel errors. Every error a method returns that matches one of these
// does so through errors.Is; most are wrapped with the ids involved. The
// server maps them to Iggy error codes.
var (
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("store: closed")
	// ErrLocked is returned by Open when the directory is already open, in
	// this process or in another one.
	ErrLocked = errors.New("store: directory is locked by another open store")
	// ErrCorrupt is returned when stored data does not decode; the store
	// never writes such data itself.
	ErrCorrupt = errors.New("store: corrupt data")

	// ErrInvalidName is returned for an empty name or one longer than 255 bytes.
	ErrInvalidName = errors.New("store: invalid name")
	// ErrLimit is returned when an id space is exhausted (2^20 streams,
	// 4096 topics per stream, partition ids below 1,000,000, offsets).
	ErrLimit = errors.New("store: limit reached")

	// ErrStreamExists is returned when a stream with the name exists (Iggy 1012).
	ErrStreamExists = errors.New("store: stream name already exists")
	// ErrStreamNotFound is returned when the stream id does not exist (Iggy 1009).
	ErrStreamNotFound = errors.New("store: stream not found")
	// ErrTopicExists is returned when the stream has a topic with the name (Iggy 2013).
	ErrTopicExists = errors.New("store: topic name already exists")
	// ErrTopicNotFound is returned when the topic id does not exist (Iggy 2010).
	ErrTopicNotFound = errors.New("store: topic not found")
	// ErrPartitionNotFound is returned when the partition id does not exist (Iggy 3007).
	ErrPartitionNotFound = errors.New("store: partition not found")
	// ErrPartitionsCount is returned by CreatePartitions/CreateTopic for a
	// count above 1000 (or 0 for CreatePartitions) and by DeletePartitions
	// for 0, above 1000, or more than the topic has (Iggy 2015/2019).
	ErrPartitionsCount = errors.New("store: invalid partitions count")
	// ErrGroupExists is returned when the topic has a group with the name (Iggy 5004).
	ErrGroupExists = errors.New("store: consumer group name already exists")
	// ErrGroupNotFound is returned when the group id does not exist (Iggy 5000).
	ErrGroupNotFound = errors.New("store: consumer group not found")

	// ErrInvalidBatch is returned by Append for an empty batch or a count of 0.
	ErrInvalidBatch = errors.New("store: invalid batch")
	// ErrOffsetMismatch is returned by Append when the batch was stamped
	// with another base offset than the partition's next offset, or with a
	// base timestamp older than the partition's last one.
	ErrOffsetMismatch = errors.New("store: batch stamped with wrong base offset or timestamp")
	// ErrOffsetOutOfRange is returned by StoreConsumerOffset when the offset
	// is beyond the partition's current offset or the partition is empty
	// (Iggy 4100).
	ErrOffsetOutOfRange = errors.New("store: offset beyond current offset")
	// ErrInvalidConsumer is returned for a consumer kind other than
	// KindConsumer and KindGroup.
	ErrInvalidConsumer = errors.New("store: invalid consumer kind")
	// ErrConsumerOffsetNotFound is returned by DeleteConsumerOffset when no
	// offset is stored (Iggy 3021).
	ErrConsumerOffsetNotFound = errors.New("store: consumer offset not found")

	// ErrUserExists is returned when a user with the username exists.
	ErrUserExists = errors.New("store: user already exists")
	// ErrUserNotFound is returned when the user id or name does not exist.
	ErrUserNotFound = errors.New("store: user not found")
	// ErrInvalidCredentials is returned by Authenticate for an unknown user
	// or a wrong password (the two are not told apart).
	ErrInvalidCredentials = errors.New("store: invalid credentials")
	// ErrTokenExists is returned when the user has a token with the name (Iggy 51).
	ErrTokenExists = errors.New("store: personal access token name already exists")
	// ErrTokenNotFound is returned when the user has no token with the name.
	ErrTokenNotFound = errors.New("store: personal access token not found")
	// ErrTokenLimit is returned when the user already has MaxTokensPerUser
	// tokens (Iggy 52); it is checked before the duplicate name.
	ErrTokenLimit = errors.New("store: too many personal access tokens")
	// ErrInvalidToken is returned by AuthenticateToken for an unknown or
	// expired token.
	ErrInvalidToken = errors.New("store: invalid or expired personal access token")
)
