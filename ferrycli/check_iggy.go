package ferrycli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

// iggyCheckTimeout bounds `ferry check --connect`'s connection to Iggy and its reads.
const iggyCheckTimeout = 10 * time.Second

// topicCheck is what the Iggy server says of one stream/topic a connector names.
type topicCheck struct {
	partitions uint32 // when it exists
	err        error  // nil: it exists
	missing    bool   // err says the stream or the topic does not exist
}

// iggyTopics reads, for `ferry check --connect`, every stream and topic the enabled
// connectors name from the server of rc, once each. Nothing is created.
type iggyTopics struct {
	client       *iggy.Client
	addr         string
	createTopics bool   // --create-topics: a missing topic is what run would create
	partitions   uint32 // --partitions
	seen         map[[2]string]topicCheck
}

// dialIggyCheck connects to rc's Iggy server for the check, within iggyCheckTimeout.
func dialIggyCheck(ctx context.Context, rc *config.Runtime) (*iggy.Client, error) {
	opts, err := clientOptions(rc.Iggy, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, iggyCheckTimeout)
	defer cancel()
	c, err := iggy.Dial(dctx, rc.Iggy.Address, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: [iggy] address: cannot reach the Iggy server at %s: %w; fix: start it, or correct [iggy] address and the credentials", rc.Path, rc.Iggy.Address, err)
	}
	return c, nil
}

// topic looks stream/topic up once.
func (it *iggyTopics) topic(ctx context.Context, stream, topic string) topicCheck {
	k := [2]string{stream, topic}
	if tc, ok := it.seen[k]; ok {
		return tc
	}
	rctx, cancel := context.WithTimeout(ctx, iggyCheckTimeout)
	defer cancel()
	var tc topicCheck
	if _, err := it.client.GetStream(rctx, iggy.Name(stream)); err != nil {
		tc.err = fmt.Errorf("stream %q: %w", stream, err)
		if errors.Is(err, wire.ErrNotFound) {
			tc.err, tc.missing = fmt.Errorf("stream %q does not exist on the Iggy server at %s", stream, it.addr), true
		}
	} else if d, err := it.client.GetTopic(rctx, iggy.Name(stream), iggy.Name(topic)); err != nil {
		tc.err = fmt.Errorf("stream %q, topic %q: %w", stream, topic, err)
		if errors.Is(err, wire.ErrNotFound) {
			tc.err, tc.missing = fmt.Errorf("topic %q does not exist in stream %q on the Iggy server at %s", topic, stream, it.addr), true
		}
	} else {
		tc.partitions = uint32(len(d.Partitions))
	}
	it.seen[k] = tc
	return tc
}

// check reports one named topic: a note for the line ("s/t: 3 partitions", or what
// --create-topics would create) and an error naming the file, the key and the fix when
// run would fail on it.
func (it *iggyTopics) check(ctx context.Context, file, key, stream, topic string) (string, error) {
	tc := it.topic(ctx, stream, topic)
	switch {
	case tc.err == nil:
		return fmt.Sprintf("%s/%s: %d partition(s)", stream, topic, tc.partitions), nil
	case !tc.missing:
		return "", fmt.Errorf("%s: %s: %w", file, key, tc.err)
	case it.createTopics:
		return fmt.Sprintf("%s/%s: missing, --create-topics creates it with %d partition(s)", stream, topic, it.partitions), nil
	}
	return "", fmt.Errorf("%s: %s: %w; fix: ferry run --create-topics (creates it with --partitions partitions), create it on the server, or correct %s", file, key, tc.err, key)
}

