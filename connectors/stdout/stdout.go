package stdout

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"unicode/utf8"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:stdout".
const Name = "stdout"

// plugin_config fields.
const (
	// FieldPrintPayload: bool, default false; also print each message's payload (as text for
	// text and json schemas when it is valid UTF-8, else as "base64:<data>").
	FieldPrintPayload = "print_payload"
)

// Spec declares plugin_config; Open decodes with it and `ferry check` validates with it.
// Under offset_commit = "sink_controlled" the sink commits each batch once its lines are
// written (sdk.CommitsEachBatch): the write returning is the only durability standard
// output has, so the mode stores what after_consuming would.
var Spec = sdk.ConfigSpec{Commits: sdk.CommitsEachBatch, Fields: []sdk.ConfigField{
	{Name: FieldPrintPayload, Type: sdk.TypeBool, Default: false,
		Doc: "also print each message's payload (text when valid UTF-8 of a text/json stream, else base64:…)"},
}}

// Config is the sink's plugin_config.
type Config struct {
	PrintPayload bool `json:"print_payload"`
}

// Sink prints messages. Consume is safe for concurrent use (lines never interleave).
type Sink struct {
	mu        sync.Mutex
	w         io.Writer
	cfg       Config
	buf       bytes.Buffer
	committer sdk.Committer // sink_controlled only
	log       *slog.Logger
}

// New returns a sink printing to os.Stdout.
func New() *Sink { return NewWriter(os.Stdout) }

// NewWriter returns a sink printing to w.
func NewWriter(w io.Writer) *Sink { return &Sink{w: w} }

// Open reads plugin_config ("null" = defaults); unknown fields are an error.
func (s *Sink) Open(_ context.Context, env sdk.SinkEnv) error {
	s.committer, s.log = env.Committer, env.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return decodeConfig(env.Config, &s.cfg)
}

func decodeConfig(raw []byte, dst any) error {
	if err := Spec.Decode(raw, dst); err != nil {
		return fmt.Errorf("stdout sink: %w", err)
	}
	return nil
}

// Consume writes one line per message:
// "<stream>/<topic> partition=<p> offset=<o> id=<hex>[ payload=<text|base64:...>]".
// Under sink_controlled it then commits the batch's last offset.
func (s *Sink) Consume(_ context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Reset()
	for _, m := range msgs {
		fmt.Fprintf(&s.buf, "%s/%s partition=%d offset=%d id=%s", topic.Stream, topic.Topic, meta.Partition.PartitionID, m.Offset, m.ID)
		if s.cfg.PrintPayload {
			s.buf.WriteString(" payload=")
			s.buf.WriteString(renderPayload(meta.Schema, m.Payload))
		}
		s.buf.WriteByte('\n')
	}
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return fmt.Errorf("stdout sink: write: %w", err)
	}
	if s.committer != nil && len(msgs) > 0 {
		last := msgs[len(msgs)-1].Offset
		// The lines are out: a refused commit (the partition moved to another member, or
		// the offset is already stored) only means they may be printed again.
		if err := s.committer.Commit(meta.Partition, last); err != nil && !errors.Is(err, sdk.ErrCommitStale) {
			s.log.Warn("stdout sink: commit refused", "partition", meta.Partition.PartitionID, "offset", last, "error", err)
		}
	}
	return nil
}

func renderPayload(schema sdk.Schema, p []byte) string {
	if (schema == sdk.SchemaText || schema == sdk.SchemaJSON) && utf8.Valid(p) && !bytes.ContainsAny(p, "\n\r") {
		return string(p)
	}
	return "base64:" + base64.StdEncoding.EncodeToString(p)
}

// Close does nothing; the writer is the caller's.
func (s *Sink) Close(context.Context) error { return nil }
