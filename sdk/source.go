package sdk

import (
	"context"
	"errors"
	"log/slog"
)

// ErrEndOfInput is returned by [Source.Read] when the source has nothing more to produce,
// ever. The runtime then closes the source cleanly.
var ErrEndOfInput = errors.New("end of input")

// SourceEnv is what the runtime hands a source when it opens it.
type SourceEnv struct {
	// Key is the connector's key from its config file.
	Key string
	// Config is the connector's plugin_config, as compact JSON ("null" when absent).
	Config []byte
	// State is the state saved with the last batch Iggy confirmed, or nil on a first start.
	State  []byte
	Logger *slog.Logger
}

// SourceBatch is what a source produces in one Read.
type SourceBatch struct {
	Schema   Schema
	Messages []ProducedMessage
	// State is the source's cursor after this batch. The runtime saves it, atomically, only
	// after Iggy confirmed the send; after a crash the source reopens with it. nil keeps the
	// previous state.
	State []byte
}

// AckFunc tells a source what became of a batch. err == nil: Iggy confirmed every message
// and the batch's state was saved. err != nil: the batch was not delivered (the runtime gave
// up or is stopping); the source may produce it again. The runtime calls it exactly once per
// batch, before the next Read. ctx bounds the call.
type AckFunc func(ctx context.Context, err error) error

// NoAck is an AckFunc for sources that need no acknowledgement.
func NoAck(context.Context, error) error { return nil }

// Source reads from an external system and produces messages for Iggy.
//
// The runtime calls Open, then Read repeatedly: it does not call Read again until the
// previous batch was sent to Iggy, its state saved and its AckFunc called (one batch in
// flight), then Close.
type Source interface {
	// Open prepares the source. ctx bounds only the opening.
	Open(ctx context.Context, env SourceEnv) error
	// Read blocks until a batch is ready or ctx ends. It returns ErrEndOfInput when done.
	// A batch with no messages is allowed (it only moves the state). The AckFunc must be
	// non-nil (use NoAck).
	Read(ctx context.Context) (SourceBatch, AckFunc, error)
	// Close releases the source. ctx bounds the time Close may take.
	Close(ctx context.Context) error
}
