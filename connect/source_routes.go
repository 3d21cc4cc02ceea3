package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/sdk"
)

// A source may route a message to another Iggy stream or topic than its [[streams]]
// entry's (sdk.ProducedMessage.Stream, Topic: an MQTT source mapping topic filters to Iggy
// topics). The runner then keeps one producer per target, made at the first message for it
// with the entry's batching, and sends each target's messages in a send of their own.

// target is an Iggy stream and topic a source sends to.
type target struct{ stream, topic string }

// targetMessages is one target's messages of a send, in read order.
type targetMessages struct {
	target target
	routed bool // not the entry's own target: its producer is in sourceRoutes
	msgs   []sdk.ProducedMessage
}

// byTarget splits msgs by target, keeping each target's messages in order. A batch no
// message of which is routed elsewhere, the common case, is one group without a copy.
func (s *sourceRunner) byTarget(msgs []sdk.ProducedMessage) []targetMessages {
	own := target{s.stream.Stream, s.stream.Topic}
	of := func(m *sdk.ProducedMessage) target {
		t := own
		if m.Stream != "" {
			t.stream = m.Stream
		}
		if m.Topic != "" {
			t.topic = m.Topic
		}
		return t
	}
	routed := false
	for i := range msgs {
		if of(&msgs[i]) != own {
			routed = true
			break
		}
	}
	if !routed {
		return []targetMessages{{target: own, msgs: msgs}}
	}
	var groups []targetMessages
	index := map[target]int{}
	for i := range msgs {
		t := of(&msgs[i])
		j, ok := index[t]
		if !ok {
			j = len(groups)
			index[t] = j
			groups = append(groups, targetMessages{target: t, routed: t != own})
		}
		groups[j].msgs = append(groups[j].msgs, msgs[i])
	}
	return groups
}

// sourceRoutes holds the producers of a source's routed targets.
type sourceRoutes struct {
	mu    sync.Mutex
	prods map[target]producer
}

// get returns t's producer, making it at first use with the batching of the entry. A
// missing stream or topic is a *missingTopicError.
func (r *sourceRoutes) get(ctx context.Context, prods producers, t target, entry config.SourceStream, log *slog.Logger) (producer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.prods[t]; ok {
		return p, nil
	}
	pc := producerConfig{Stream: t.stream, Topic: t.topic, BatchLength: entry.BatchLength, Linger: entry.LingerTime}
	p, err := prods.newProducer(ctx, pc)
	var missing *missingTopicError
	if c, ok := prods.(routeCreator); ok && errors.As(err, &missing) {
		made, partitions, on, cerr := c.createTopic(ctx, t.stream, t.topic)
		switch {
		case cerr != nil:
			return nil, fmt.Errorf("create the routed target %s/%s: %w", t.stream, t.topic, cerr)
		case on:
			logCreated(log, t, made, partitions)
			p, err = prods.newProducer(ctx, pc)
		}
	}
	if err != nil {
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("a message routed to %s/%s: %w (ferry run --create-topics creates a routed target when its first message comes; without it create it beforehand)", t.stream, t.topic, err)
		}
		return nil, fmt.Errorf("producer %s/%s: %w", t.stream, t.topic, err)
	}
	if r.prods == nil {
		r.prods = map[target]producer{}
	}
	r.prods[t] = p
	log.Info("source sends to a routed target", "stream", t.stream, "topic", t.topic)
	return p, nil
}

// routeCreator is a backend that may create a missing routed target
// (Options.CreateRoutedTopics); ok is false when it may not.
type routeCreator interface {
	createTopic(ctx context.Context, stream, topic string) (made iggy.Created, partitions uint32, ok bool, err error)
}

// logCreated logs a routed target's creation as --create-topics logs its own.
func logCreated(log *slog.Logger, t target, made iggy.Created, partitions uint32) {
	switch {
	case made.Stream && made.Topic:
		log.Info("created stream and topic of a routed target", "stream", t.stream, "topic", t.topic, "partitions", partitions)
	case made.Topic:
		log.Info("created topic of a routed target", "stream", t.stream, "topic", t.topic, "partitions", partitions)
	}
}

// close closes every routed target's producer.
func (r *sourceRoutes) close(ctx context.Context, log *slog.Logger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for t, p := range r.prods {
		if err := p.close(ctx); err != nil {
			log.Warn("routed producer close failed", "stream", t.stream, "topic", t.topic, "error", err)
		}
	}
	r.prods = nil
}
