package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// Options configures a Runtime.
type Options struct {
	// Connectors is the active connector configuration (config.LoadConnectors). Required.
	Connectors *config.Connectors
	// Runtime is the runtime config.toml; kept for the connectors that need it (state
	// directory for sources). Optional.
	Runtime *config.Runtime
	// Client is a connected Iggy client. Each sink topic opens its own consumer-group
	// member connection through it. Required; the Runtime does not close it.
	Client *iggy.Client
	// Builtins lists the built-in Go connectors ("builtin:NAME"). nil = none.
	Builtins *sdk.Registry
	// LoadSinkPlugin opens native plugins; nil refuses native sinks (status error).
	LoadSinkPlugin SinkPluginLoader
	// LoadSourcePlugin opens native source plugins; nil refuses native sources (status
	// error). Source state files live in Runtime.State.Path (default "local_state").
	LoadSourcePlugin SourcePluginLoader
	// Logger receives the runtime's logs; nil = slog.Default().
	Logger *slog.Logger
}

// New checks opts and returns a Runtime that is not started yet.
func New(opts Options) (*Runtime, error) {
	if opts.Connectors == nil {
		return nil, errors.New("connect: Options.Connectors is required")
	}
	if opts.Client == nil {
		return nil, errors.New("connect: Options.Client is required")
	}
	for _, s := range opts.Connectors.Sinks {
		if !s.Enabled {
			continue
		}
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
	}
	if err := validateSources(opts.Connectors); err != nil {
		return nil, err
	}
	b := &iggyBackend{c: opts.Client}
	rt := newRuntime(opts.Connectors, b, opts.Builtins, opts.LoadSinkPlugin, opts.Logger)
	rt.sources = sourceDepsFor(opts, b)
	return rt, nil
}

// iggyBackend implements backend over *iggy.Client.
type iggyBackend struct{ c *iggy.Client }

func (b *iggyBackend) topicMetadata(ctx context.Context, stream, topic string) (sdk.TopicMetadata, error) {
	s, err := b.c.GetStream(ctx, iggy.Name(stream))
	if err != nil {
		return sdk.TopicMetadata{}, fmt.Errorf("get stream %s: %w", stream, err)
	}
	t, err := b.c.GetTopic(ctx, iggy.Name(stream), iggy.Name(topic))
	if err != nil {
		return sdk.TopicMetadata{}, fmt.Errorf("get topic %s/%s: %w", stream, topic, err)
	}
	return sdk.TopicMetadata{Stream: s.Name, Topic: t.Name, StreamID: s.ID, TopicID: t.ID}, nil
}

func (b *iggyBackend) newConsumer(ctx context.Context, cfg consumerConfig) (memberConsumer, error) {
	cn, err := b.c.NewConsumer(ctx, iggy.ConsumerConfig{
		Stream: iggy.Name(cfg.Stream), Topic: iggy.Name(cfg.Topic), Group: cfg.Group,
		BatchSize: cfg.BatchSize, PollInterval: cfg.PollInterval, AutoCommit: cfg.AutoCommit,
	})
	if err != nil {
		return nil, err
	}
	a := &iggyConsumer{cn: cn, events: make(chan assignmentEvent, 16), done: make(chan struct{})}
	a.wg.Add(1)
	go a.forwardEvents()
	return a, nil
}

func (b *iggyBackend) newDeadLetterProducer(ctx context.Context, stream, topic string) (deadLetterProducer, error) {
	if _, err := b.c.GetStream(ctx, iggy.Name(stream)); errors.Is(err, wire.ErrNotFound) {
		if _, err := b.c.CreateStream(ctx, stream); err != nil && !errors.Is(err, wire.ErrAlreadyExists) {
			return nil, fmt.Errorf("create stream %s: %w", stream, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("get stream %s: %w", stream, err)
	}
	if _, err := b.c.GetTopic(ctx, iggy.Name(stream), iggy.Name(topic)); errors.Is(err, wire.ErrNotFound) {
		if _, err := b.c.CreateTopic(ctx, iggy.Name(stream), topic, 1); err != nil && !errors.Is(err, wire.ErrAlreadyExists) {
			return nil, fmt.Errorf("create topic %s/%s: %w", stream, topic, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("get topic %s/%s: %w", stream, topic, err)
	}
	p, err := b.c.NewProducer(ctx, iggy.ProducerConfig{Stream: iggy.Name(stream), Topic: iggy.Name(topic)})
	if err != nil {
		return nil, err
	}
	return &iggyDLQ{p: p}, nil
}

// iggyConsumer adapts *iggy.Consumer. One goroutine forwards assignment events until Close.
type iggyConsumer struct {
	cn     *iggy.Consumer
	events chan assignmentEvent
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

func (a *iggyConsumer) forwardEvents() {
	defer a.wg.Done()
	in := a.cn.Events()
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				return
			}
			select {
			case a.events <- assignmentEvent{Generation: ev.Generation, Assigned: ev.Assigned, Revoked: ev.Revoked}:
			case <-a.done:
				return
			}
		case <-a.done:
			return
		}
	}
}

func (a *iggyConsumer) Poll(ctx context.Context) (consumerBatch, error) {
	b, err := a.cn.Poll(ctx)
	if err != nil {
		return consumerBatch{}, err
	}
	return consumerBatch{Partition: b.Partition, CurrentOffset: b.CurrentOffset, Generation: b.Generation,
		Messages: b.Messages, Release: b.Release}, nil
}

func (a *iggyConsumer) Commit(ctx context.Context, partition uint32, offset uint64) error {
	return a.cn.Commit(ctx, partition, offset)
}
func (a *iggyConsumer) Pause(p uint32)                 { a.cn.Pause(p) }
func (a *iggyConsumer) Resume(p uint32)                { a.cn.Resume(p) }
func (a *iggyConsumer) Events() <-chan assignmentEvent { return a.events }

func (a *iggyConsumer) Close(ctx context.Context) error {
	a.once.Do(func() { close(a.done) })
	err := a.cn.Close(ctx)
	a.wg.Wait()
	return err
}

type iggyDLQ struct{ p *iggy.Producer }

func (d *iggyDLQ) sendDeadLetters(ctx context.Context, msgs []sdk.ProducedMessage) error {
	out := make([]iggy.Message, len(msgs))
	for i, m := range msgs {
		out[i] = iggy.Message{Headers: wireHeaders(m.Headers), Payload: m.Payload}
	}
	return d.p.Send(ctx, out)
}

func (d *iggyDLQ) Close(ctx context.Context) error { return d.p.Close(ctx) }

// wireHeaders converts sdk headers to wire key/values (for the dead-letter producer).
func wireHeaders(hs []sdk.Header) []wire.KV {
	if len(hs) == 0 {
		return nil
	}
	out := make([]wire.KV, len(hs))
	for i, h := range hs {
		out[i] = wire.KV{
			Key:   wire.HeaderValue{Kind: wire.HeaderKind(h.Key.Kind), Raw: h.Key.Value},
			Value: wire.HeaderValue{Kind: wire.HeaderKind(h.Value.Kind), Raw: h.Value.Value},
		}
	}
	return out
}
