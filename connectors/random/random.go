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

// plugin_config fields.
const (
	// FieldMessagesPerSecond: float, default 0 = as fast as the runtime takes them.
	FieldMessagesPerSecond = "messages_per_second"
	// FieldCount: total messages over the source's whole life (state included); 0 = unlimited.
	FieldCount = "count"
	// FieldPayloadSize: payload bytes per message, default 64.
	FieldPayloadSize = "payload_size"
	// FieldBatchSize: messages per batch, default 100.
	FieldBatchSize = "batch_size"
	// FieldSeed: when set, message i's payload depends only on (seed, i): reproducible runs.
	FieldSeed = "seed"
)

// Config is the source's plugin_config.
type Config struct {
	MessagesPerSecond float64 `json:"messages_per_second"`
	Count             uint64  `json:"count"`
	PayloadSize       int     `json:"payload_size"`
	BatchSize         int     `json:"batch_size"`
	Seed              *uint64 `json:"seed"`
}

// Defaults.
const (
	DefaultPayloadSize = 64
	DefaultBatchSize   = 100
)

// Spec declares plugin_config; Open decodes with it and `ferry check` validates with it.
var Spec = sdk.ConfigSpec{Fields: []sdk.ConfigField{
	{Name: FieldMessagesPerSecond, Type: sdk.TypeNumber, Default: 0, Doc: "rate limit; 0 = as fast as the runtime takes them"},
	{Name: FieldCount, Type: sdk.TypeUnsigned, Default: 0, Doc: "total messages over the source's whole life (state included); 0 = unlimited"},
	{Name: FieldPayloadSize, Type: sdk.TypeUnsigned, Default: DefaultPayloadSize, Doc: "payload bytes per message"},
	{Name: FieldBatchSize, Type: sdk.TypeUnsigned, Default: DefaultBatchSize, Doc: "messages per batch (> 0)"},
	{Name: FieldSeed, Type: sdk.TypeUnsigned, Doc: "when set, message i's payload depends only on (seed, i): reproducible runs; default random"},
}}

const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// Source produces random messages. Not safe for concurrent use (the runtime calls it from one
// goroutine).
type Source struct {
	cfg      Config
	produced uint64 // messages handed out, including the unacknowledged batch
	started  time.Time
	base     uint64 // produced at Open, for the rate schedule
	seed     uint64
}

// New returns an unopened random source.
func New() *Source { return &Source{} }

// Open reads plugin_config and the state (8 bytes, little-endian message count).
func (s *Source) Open(_ context.Context, env sdk.SourceEnv) error {
	s.cfg = Config{}
	if err := Spec.Decode(env.Config, &s.cfg); err != nil {
		return fmt.Errorf("random source: %w", err)
	}
	if s.cfg.PayloadSize < 0 || s.cfg.BatchSize <= 0 || s.cfg.MessagesPerSecond < 0 {
		return fmt.Errorf("random source: plugin_config: payload_size must be >= 0, batch_size > 0, messages_per_second >= 0")
	}
	switch len(env.State) {
	case 0:
		s.produced = 0
	case 8:
		s.produced = binary.LittleEndian.Uint64(env.State)
	default:
		return fmt.Errorf("random source: state has %d bytes, want 8", len(env.State))
	}
	s.base, s.started = s.produced, time.Now()
	if s.cfg.Seed != nil {
		s.seed = *s.cfg.Seed
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
	n := uint64(s.cfg.BatchSize)
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
