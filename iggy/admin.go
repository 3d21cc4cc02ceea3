package iggy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// Streams, topics and partitions. Every call is safe for concurrent use, bounded by ctx
// and the request timeout, and returns an *OpError; server refusals unwrap to
// *wire.ServerError (e.g. errors.Is(err, wire.ErrNotFound), wire.ErrAlreadyExists).
// Reads are retried transparently after a connection failure; creates and deletes
// return ErrOutcomeUnknown instead (the server may have applied them).

func ptr(id Identifier) *Identifier { return &id }

// CreateStream creates a stream named name; the server assigns its id.
func (c *Client) CreateStream(ctx context.Context, name string) (wire.StreamResponse, error) {
	var out wire.StreamResponse
	req := wire.CreateStreamRequest{Name: name}
	if err := wire.CheckRequest(req); err != nil {
		return out, opErr("create stream", "stream "+Name(name).String(), err)
	}
	err := c.call(ctx, nil, req, false, func(p []byte) (err error) {
		out, err = wire.DecodeStreamResponse(p)
		return decodeErr(err)
	})
	if err != nil {
		return wire.StreamResponse{}, opErr("create stream", "stream "+Name(name).String(), err)
	}
	return out, nil
}

// GetStream returns a stream and its topics; wire.ErrStreamIDNotFound if it does not exist.
func (c *Client) GetStream(ctx context.Context, stream Identifier) (wire.StreamDetails, error) {
	var out wire.StreamDetails
	err := c.call(ctx, nil, wire.GetStreamRequest{Stream: stream}, true, func(p []byte) error {
		s, found, err := wire.DecodeStreamDetails(p)
		if err != nil {
			return decodeErr(err)
		}
		if !found {
			return wire.ErrStreamIDNotFound
		}
		out = s
		return nil
	})
	if err != nil {
		return wire.StreamDetails{}, opErr("get stream", res(&stream, nil, -1), err)
	}
	return out, nil
}

// GetStreams lists every stream.
func (c *Client) GetStreams(ctx context.Context) ([]wire.StreamResponse, error) {
	var out []wire.StreamResponse
	err := c.call(ctx, nil, wire.GetStreamsRequest{}, true, func(p []byte) (err error) {
		out, err = wire.DecodeStreams(p)
		return decodeErr(err)
	})
	if err != nil {
		return nil, opErr("get streams", "", err)
	}
	return out, nil
}

// DeleteStream deletes a stream with its topics and messages.
func (c *Client) DeleteStream(ctx context.Context, stream Identifier) error {
	if err := c.simple(ctx, nil, wire.DeleteStreamRequest{Stream: stream}, false, nil); err != nil {
		return opErr("delete stream", res(&stream, nil, -1), err)
	}
	return nil
}

// PurgeStream deletes every message of every partition of the stream's topics: each
// partition starts again at offset 0 and its stored offsets are cleared (topics, groups
// and their members stay). A Consumer of a purged partition notices it (see
// AssignmentChange.Rewound).
func (c *Client) PurgeStream(ctx context.Context, stream Identifier) error {
	if err := c.simple(ctx, nil, wire.PurgeStreamRequest{Stream: stream}, false, nil); err != nil {
		return opErr("purge stream", res(&stream, nil, -1), err)
	}
	return nil
}

// TopicOpt sets one option of CreateTopic.
type TopicOpt struct{ kv wire.KV }

// WithTopicOption sets any topic option (keys: wire.Opt…).
func WithTopicOption(key string, v wire.HeaderValue) TopicOpt {
	return TopicOpt{wire.StringKV(key, v)}
}

// WithMessageExpiry deletes messages older than d. Default: never.
func WithMessageExpiry(d time.Duration) TopicOpt {
	return WithTopicOption(wire.OptMessageExpiry, wire.Uint64Value(uint64(d/time.Microsecond)))
}

// WithMaxTopicSize caps the topic's size in bytes. Default: unlimited.
func WithMaxTopicSize(bytes uint64) TopicOpt {
	return WithTopicOption(wire.OptMaxTopicSize, wire.Uint64Value(bytes))
}

// WithEnforceFsync makes the server fsync every append to the topic. Default false.
func WithEnforceFsync(on bool) TopicOpt {
	return WithTopicOption(wire.OptEnforceFsync, wire.BoolValue(on))
}

// CreateTopic creates a topic with partitions partitions (ids 0..partitions-1).
func (c *Client) CreateTopic(ctx context.Context, stream Identifier, name string, partitions uint32, opts ...TopicOpt) (wire.TopicDetails, error) {
	var out wire.TopicDetails
	req := wire.CreateTopicRequest{Stream: stream, PartitionsCount: partitions, Name: name}
	for _, o := range opts {
		req.Options = append(req.Options, o.kv)
	}
	where := res(&stream, ptr(Name(name)), -1)
	if err := wire.CheckRequest(req); err != nil {
		return out, opErr("create topic", where, err)
	}
	err := c.call(ctx, nil, req, false, func(p []byte) error {
		t, _, err := wire.DecodeTopicDetails(p)
		out = t
		return decodeErr(err)
	})
	if err != nil {
		return wire.TopicDetails{}, opErr("create topic", where, err)
	}
	return out, nil
}

// GetTopic returns a topic and its partitions; wire.ErrTopicIDNotFound if the topic or
// its stream does not exist.
func (c *Client) GetTopic(ctx context.Context, stream, topic Identifier) (wire.TopicDetails, error) {
	var out wire.TopicDetails
	err := c.call(ctx, nil, wire.GetTopicRequest{Stream: stream, Topic: topic}, true, func(p []byte) error {
		t, found, err := wire.DecodeTopicDetails(p)
		if err != nil {
			return decodeErr(err)
		}
		if !found {
			return wire.ErrTopicIDNotFound
		}
		out = t
		return nil
	})
	if err != nil {
		return wire.TopicDetails{}, opErr("get topic", res(&stream, &topic, -1), err)
	}
	return out, nil
}

// GetTopics lists a stream's topics (none for a missing stream).
func (c *Client) GetTopics(ctx context.Context, stream Identifier) ([]wire.TopicHeader, error) {
	var out []wire.TopicHeader
	err := c.call(ctx, nil, wire.GetTopicsRequest{Stream: stream}, true, func(p []byte) (err error) {
		out, err = wire.DecodeTopics(p)
		return decodeErr(err)
	})
	if err != nil {
		return nil, opErr("get topics", res(&stream, nil, -1), err)
	}
	return out, nil
}

// DeleteTopic deletes a topic with its messages, offsets and groups.
func (c *Client) DeleteTopic(ctx context.Context, stream, topic Identifier) error {
	if err := c.simple(ctx, nil, wire.DeleteTopicRequest{Stream: stream, Topic: topic}, false, nil); err != nil {
		return opErr("delete topic", res(&stream, &topic, -1), err)
	}
	return nil
}

// PurgeTopic deletes every message of every partition of the topic, as PurgeStream does
// for one topic.
func (c *Client) PurgeTopic(ctx context.Context, stream, topic Identifier) error {
	if err := c.simple(ctx, nil, wire.PurgeTopicRequest{Stream: stream, Topic: topic}, false, nil); err != nil {
		return opErr("purge topic", res(&stream, &topic, -1), err)
	}
	return nil
}

// CreatePartitions adds n partitions (ids continue after the highest).
func (c *Client) CreatePartitions(ctx context.Context, stream, topic Identifier, n uint32) error {
	if err := c.simple(ctx, nil, wire.CreatePartitionsRequest{Stream: stream, Topic: topic, PartitionsCount: n}, false, nil); err != nil {
		return opErr("create partitions", res(&stream, &topic, -1), err)
	}
	return nil
}

// DeletePartitions removes the n highest partitions with their messages.
func (c *Client) DeletePartitions(ctx context.Context, stream, topic Identifier, n uint32) error {
	if err := c.simple(ctx, nil, wire.DeletePartitionsRequest{Stream: stream, Topic: topic, PartitionsCount: n}, false, nil); err != nil {
		return opErr("delete partitions", res(&stream, &topic, -1), err)
	}
	return nil
}

// CreatePersonalAccessToken creates a token for the logged-in user, valid for expiry
// (0 = never), and returns the raw token (shown only once; log in with WithToken).
func (c *Client) CreatePersonalAccessToken(ctx context.Context, name string, expiry time.Duration) (string, error) {
	req := wire.CreatePATRequest{Name: name, Expiry: uint64(expiry / time.Microsecond)}
	var out string
	err := c.call(ctx, nil, req, false, func(p []byte) error {
		t, err := wire.DecodeRawToken(p)
		out = t.Token
		return decodeErr(err)
	})
	if err != nil {
		return "", opErr("create personal access token", "token "+Name(name).String(), err)
	}
	return out, nil
}

// DeletePersonalAccessToken deletes the logged-in user's token name; wire.ErrResourceNotFound
// if it has none of that name. Connections already logged in with it stay logged in.
func (c *Client) DeletePersonalAccessToken(ctx context.Context, name string) error {
	if err := c.simple(ctx, nil, wire.DeletePATRequest{Name: name}, false, nil); err != nil {
		return opErr("delete personal access token", "token "+Name(name).String(), err)
	}
	return nil
}

// PersonalAccessTokens lists the logged-in user's tokens (names and expiry, never the
// tokens themselves).
func (c *Client) PersonalAccessTokens(ctx context.Context) ([]wire.PATInfo, error) {
	var out []wire.PATInfo
	err := c.call(ctx, nil, wire.GetPATsRequest{}, true, func(p []byte) (err error) {
		out, err = wire.DecodePATs(p)
		return decodeErr(err)
	})
	if err != nil {
		return nil, opErr("get personal access tokens", "", err)
	}
	return out, nil
}

// EnsureTopic creates stream and topic (with partitions partitions) when they are missing
// and leaves existing ones as they are (an existing topic keeps its partition count). A
// concurrent creator is tolerated: AlreadyExists counts as success. Errors name the
// stream or topic; a server that refuses the create (permissions, limits) is reported
// as such.
func (c *Client) EnsureTopic(ctx context.Context, stream, topic string, partitions uint32) error {
	_, err := c.EnsureTopicCreated(ctx, stream, topic, partitions)
	return err
}

// Created says what [Client.EnsureTopicCreated] created itself.
type Created struct{ Stream, Topic bool }

// EnsureTopicCreated is [Client.EnsureTopic], and says what this call created: a stream or
// topic that existed, or that a concurrent creator made first, is not counted.
func (c *Client) EnsureTopicCreated(ctx context.Context, stream, topic string, partitions uint32) (Created, error) {
	var made Created
	if _, err := c.GetStream(ctx, Name(stream)); errors.Is(err, wire.ErrNotFound) {
		_, err := c.CreateStream(ctx, stream)
		if err != nil && !errors.Is(err, wire.ErrAlreadyExists) {
			return made, fmt.Errorf("ensure topic: %w", err)
		}
		made.Stream = err == nil
	} else if err != nil {
		return made, fmt.Errorf("ensure topic: %w", err)
	}
	if _, err := c.GetTopic(ctx, Name(stream), Name(topic)); errors.Is(err, wire.ErrNotFound) {
		_, err := c.CreateTopic(ctx, Name(stream), topic, partitions)
		if err != nil && !errors.Is(err, wire.ErrAlreadyExists) {
			return made, fmt.Errorf("ensure topic: %w", err)
		}
		made.Topic = err == nil
	} else if err != nil {
		return made, fmt.Errorf("ensure topic: %w", err)
	}
	return made, nil
}
