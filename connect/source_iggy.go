package connect

import (
	"context"
	"errors"
	"fmt"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// sourceDepsFor returns the source side of a Runtime built by New.
func sourceDepsFor(opts Options, b *iggyBackend) sourceDeps {
	d := sourceDeps{be: b, load: opts.LoadSourcePlugin, stateDir: DefaultStateDir}
	if opts.Runtime != nil && opts.Runtime.State.Path != "" {
		d.stateDir = opts.Runtime.State.Path
	}
	return d
}

// validateSources checks every enabled source of conns.
func validateSources(conns *config.Connectors) error {
	for _, s := range conns.Sources {
		if !s.Enabled {
			continue
		}
		if err := s.Validate(); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
	}
	return nil
}

func (b *iggyBackend) newSourceProducer(ctx context.Context, cfg sourceProducerConfig) (sourceProducer, error) {
	if err := EnsureTopic(ctx, b.c, cfg.Stream, cfg.Topic, 1); err != nil {
		return nil, err
	}
	p, err := b.c.NewProducer(ctx, iggy.ProducerConfig{Stream: iggy.Name(cfg.Stream), Topic: iggy.Name(cfg.Topic),
		BatchCount: int(cfg.BatchLength), Linger: cfg.Linger})
	if err != nil {
		return nil, err
	}
	return &iggySourceProducer{p: p}, nil
}

// EnsureTopic creates stream and topic (with partitions partitions) when they are missing;
// existing ones are left as they are. Races with another creator are tolerated.
func EnsureTopic(ctx context.Context, c *iggy.Client, stream, topic string, partitions uint32) error {
	if _, err := c.GetStream(ctx, iggy.Name(stream)); errors.Is(err, wire.ErrNotFound) {
		if _, err := c.CreateStream(ctx, stream); err != nil && !errors.Is(err, wire.ErrAlreadyExists) {
			return fmt.Errorf("create stream %s: %w", stream, err)
		}
	} else if err != nil {
		return fmt.Errorf("get stream %s: %w", stream, err)
	}
	if _, err := c.GetTopic(ctx, iggy.Name(stream), iggy.Name(topic)); errors.Is(err, wire.ErrNotFound) {
		if _, err := c.CreateTopic(ctx, iggy.Name(stream), topic, partitions); err != nil && !errors.Is(err, wire.ErrAlreadyExists) {
			return fmt.Errorf("create topic %s/%s: %w", stream, topic, err)
		}
	} else if err != nil {
		return fmt.Errorf("get topic %s/%s: %w", stream, topic, err)
	}
	return nil
}

type iggySourceProducer struct{ p *iggy.Producer }

func (s *iggySourceProducer) send(ctx context.Context, msgs []sdk.ProducedMessage) error {
	out := make([]iggy.Message, len(msgs))
	for i, m := range msgs {
		out[i] = iggy.Message{ID: m.ID, Headers: wireHeaders(m.Headers), Payload: m.Payload}
	}
	return s.p.Send(ctx, out)
}

func (s *iggySourceProducer) close(ctx context.Context) error { return s.p.Close(ctx) }
