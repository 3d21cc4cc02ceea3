package random

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:random".
const Name = "random"

// config is the source's plugin_config.
type config struct {
	MessagesPerSecond float64
	Count             uint64
	PayloadSize       uint64
	BatchSize         uint64
	Seed              uint64
	HasSeed           bool
}

// Config declares plugin_config: Open parses with it, `ferry check` validates with it and
// `ferry connectors` prints it.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	f.Float("messages_per_second", &c.MessagesPerSecond).Default(0).Min(0).
		Doc("rate limit; 0 = as fast as the runtime takes them")
	f.Uint64("count", &c.Count).Default(0).
		Doc("total messages over the source's whole life (state included); 0 = unlimited")
	f.Uint64("payload_size", &c.PayloadSize).Default(64).Doc("payload bytes per message")
	f.Uint64("batch_size", &c.BatchSize).Default(100).Min(1).Doc("messages per batch")
	f.Uint64("seed", &c.Seed).Present(&c.HasSeed).
		Doc("when set, message i's payload depends only on (seed, i): reproducible runs; default random")
})

// Spec is Config's spec, for the registry.
var Spec = Config.Spec()

const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// Source produces random messages. Not safe for concurrent use (the runtime calls it from one
// goroutine).
type Source struct {
	cfg      config
	produced uint64 // messages handed out, including the unacknowledged batch
	started  time.Time
	base     uint64 // produced at Open, for the rate schedule
	seed     uint64
}

// New returns an unopened random source.
func New() *Source { return &Source{} }

// Open reads plugin_config and the state (8 bytes, little-endian message count).
func (s *Source) Open(_ context.Context, env sdk.SourceEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("random source: %w", err))
	}
	s.cfg = cfg
	switch len(env.State) {
	case 0:
		s.produced = 0
	case 8:
		s.produced = binary.LittleEndian.Uint64(env.State)
	default:
		return fmt.Errorf("random source: state has %d bytes, want 8", len(env.State))
	}
	s.base, s.started = s.produced, time.Now()
	if s.cfg.HasSeed {
		s.seed = s.cfg.Seed
	} else {
		s.seed = rand.Uint64()
	}
	return nil
}

// Produced returns the number of messages produced, as saved in the state.
func (s *Source) Produced() uint64 { return s.produced }

// Read returns the next batch, waiting for the rate when one is set. It returns
// sdk.ErrEndOfInput once count messages were produced, and ctx.Err() when ctx ends while
// waiting. Message i (0-based over the source's life) has id i+1. A nack rewinds the count,
// so the same messages are produced again.
func (s *Source) Read(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	if err := ctx.Err(); err != nil {
		return sdk.SourceBatch{}, nil, err
	}
	n := s.cfg.BatchSize
	if s.cfg.Count > 0 {
		if s.produced >= s.cfg.Count {
			return sdk.SourceBatch{}, nil, sdk.ErrEndOfInput
		}
		n = min(n, s.cfg.Count-s.produced)
	}
	if r := s.cfg.MessagesPerSecond; r > 0 {
		due := s.started.Add(time.Duration(float64(s.produced-s.base+n) / r * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return sdk.SourceBatch{}, nil, ctx.Err()
			case <-t.C:
			}
		}
	}
	start := s.produced
	msgs := make([]sdk.ProducedMessage, n)
	for i := range msgs {
		idx := start + uint64(i)
		msgs[i] = sdk.ProducedMessage{ID: sdk.MessageIDFromUint64(idx + 1), Payload: s.payload(idx)}
	}
	s.produced = start + n
	state := binary.LittleEndian.AppendUint64(nil, s.produced)
	ack := func(_ context.Context, err error) error {
		if err != nil && s.produced == start+n {
			s.produced = start
		}
		return nil
	}
	return sdk.SourceBatch{Schema: sdk.SchemaRaw, Messages: msgs, State: state}, ack, nil
}

// payload returns message idx's payload, a function of (seed, idx) only.
func (s *Source) payload(idx uint64) []byte {
	r := rand.New(rand.NewPCG(s.seed, idx))
	p := make([]byte, s.cfg.PayloadSize)
	for i := range p {
		p[i] = alphabet[r.IntN(len(alphabet))]
	}
	return p
}

// Close does nothing.
func (s *Source) Close(context.Context) error { return nil }
