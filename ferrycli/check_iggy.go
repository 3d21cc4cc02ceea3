package ferrycli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

// iggyCheckTimeout bounds `ferry check --connect`'s connection to Iggy and each read.
const iggyCheckTimeout = 10 * time.Second

// topicCheck is what the Iggy server says of one stream/topic a connector names.
type topicCheck struct {
	partitions    uint32 // when it exists
	err           error  // nil: it exists
	missing       bool   // the stream or the topic does not exist
	streamMissing bool   // the stream does not exist
}

// iggyTopics reads, for `ferry check --connect`, every stream and topic the enabled
// connectors name from the runtime's Iggy server, once each. Nothing is created: a missing
// topic is an error unless --create-topics says run would create it.
type iggyTopics struct {
	client       *iggy.Client
	addr         string
	createTopics bool   // --create-topics: a missing topic is what run would create
	partitions   uint32 // --partitions, what run would create it with
	seen         map[[2]string]topicCheck
}

// dialIggyCheck connects to rc's Iggy server for the check, within iggyCheckTimeout. The
// error names the runtime config, the key and the fix.
func dialIggyCheck(ctx context.Context, rc *config.Runtime) (*iggy.Client, error) {
	opts, err := clientOptions(rc.Iggy, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, iggyCheckTimeout)
	defer cancel()
	c, err := iggy.Dial(dctx, rc.Iggy.Address, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: iggy.address: cannot reach or log in to the Iggy server at %s: %w; fix: start the server, or correct [iggy] address and the credentials (username/password or token)", rc.Path, rc.Iggy.Address, err)
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
			tc.err = fmt.Errorf("stream %q does not exist on the Iggy server at %s", stream, it.addr)
			tc.missing, tc.streamMissing = true, true
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

// named is one stream/topic a connector names, with the keys of its file that name them.
type named struct {
	stream, topic       string
	streamKey, topicKey string // "streams[0].stream", "dead_letter.topic"
}

// check reports one named topic: a note for the connector's line ("s/t: 3 partition(s)",
// or what --create-topics would create) and an error naming the file, the key and the fix
// when run would fail on it.
func (it *iggyTopics) check(ctx context.Context, file string, n named) (string, error) {
	tc := it.topic(ctx, n.stream, n.topic)
	key := n.topicKey
	if tc.streamMissing {
		key = n.streamKey
	}
	switch {
	case tc.err == nil && tc.partitions == 0:
		return "", fmt.Errorf("%s: %s: topic %q of stream %q has no partitions: nothing can be sent to it or polled from it; fix: ferry topic delete %s %s && ferry topic create %s %s --partitions %d", file, n.topicKey, n.topic, n.stream, n.stream, n.topic, n.stream, n.topic, max(it.partitions, 1))
	case tc.err == nil:
		return fmt.Sprintf("%s/%s: %d partition(s)", n.stream, n.topic, tc.partitions), nil
	case !tc.missing:
		return "", fmt.Errorf("%s: %s: %w", file, key, tc.err)
	case it.createTopics:
		return fmt.Sprintf("%s/%s: missing, --create-topics creates it with %d partition(s)", n.stream, n.topic, it.partitions), nil
	}
	create := fmt.Sprintf("ferry topic create %s %s --partitions %d", n.stream, n.topic, max(it.partitions, 1))
	if tc.streamMissing {
		create = "ferry stream create " + n.stream + " && " + create
	}
	return "", fmt.Errorf("%s: %s: %w; fix: %s, or ferry run --create-topics (it creates every missing stream and topic), or correct %s", file, key, tc.err, create, key)
}

// checkAll checks every stream/topic of one connector: the notes for its line, and its
// problems.
func (it *iggyTopics) checkAll(ctx context.Context, file string, all []named) (notes []string, errs []error) {
	for _, n := range all {
		note, err := it.check(ctx, file, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		notes = append(notes, note)
	}
	return notes, errs
}

// sinkTopics lists what a sink names on Iggy: every topic of every [[streams]] entry, and
// its dead-letter topic when on_failure sends there.
func sinkTopics(s *config.Sink) []named {
	var out []named
	for i, st := range s.Streams {
		for j, t := range st.Topics {
			out = append(out, named{st.Stream, t, fmt.Sprintf("streams[%d].stream", i), fmt.Sprintf("streams[%d].topics[%d]", i, j)})
		}
	}
	if dl, ok := config.DeadLetterTopic(s.OnFailure, s.DeadLetter); ok {
		out = append(out, named{dl.Stream, dl.Topic, "dead_letter.stream", "dead_letter.topic"})
	}
	return out
}

// sourceTopics lists what a source names on Iggy: the topic of its last [[streams]] entry
// (the one it sends to), and its dead-letter topic when on_failure sends there.
func sourceTopics(s *config.Source) []named {
	var out []named
	if n := len(s.Streams); n > 0 {
		st := s.Streams[n-1]
		out = append(out, named{st.Stream, st.Topic, fmt.Sprintf("streams[%d].stream", n-1), fmt.Sprintf("streams[%d].topic", n-1)})
	}
	if dl, ok := config.DeadLetterTopic(s.OnFailure, s.DeadLetter); ok {
		out = append(out, named{dl.Stream, dl.Topic, "dead_letter.stream", "dead_letter.topic"})
	}
	return out
}

// iggyNotes is the part of a connector's line that says what Iggy holds.
func iggyNotes(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	return " [iggy: " + strings.Join(notes, "; ") + "]"
}
