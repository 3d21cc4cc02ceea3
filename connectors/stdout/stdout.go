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

// config is the sink's plugin_config.
type config struct {
	PrintPayload bool
}

// Config declares plugin_config: Open parses with it, `ferry check` validates with it and
// `ferry connectors` prints it. Under offset_commit = "sink_controlled" the sink commits
// each batch once its lines are written (sdk.CommitsEachBatch): the write returning is the
// only durability standard output has, so the mode stores what after_consuming would.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	f.Commits(sdk.CommitsEachBatch)
	f.Bool("print_payload", &c.PrintPayload).Default(false).
		Doc("also print each message's payload (text when valid UTF-8 of a text/json stream, else base64:…)")
})

// Spec is Config's spec, for the registry.
var Spec = Config.Spec()

// Sink prints messages. Consume is safe for concurrent use (lines never interleave).
type Sink struct {
	mu  sync.Mutex
	w   io.Writer
	cfg config
	buf bytes.Buffer
	pos *sdk.Positions // commits each batch (sink_controlled)
	log *slog.Logger
}

// New returns a sink printing to os.Stdout.
func New() *Sink { return NewWriter(os.Stdout) }

// NewWriter returns a sink printing to w.
func NewWriter(w io.Writer) *Sink { return &Sink{w: w} }

// Open reads plugin_config ("null" = defaults); unknown fields are an error.
func (s *Sink) Open(_ context.Context, env sdk.SinkEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("stdout sink: %w", err))
	}
	s.cfg, s.log, s.pos = cfg, env.Logger, sdk.NewPositions(env, nil)
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
	if len(msgs) > 0 {
		last := msgs[len(msgs)-1].Offset
		// The lines are out: a refused commit (the partition moved to another member, or
		// the offset is already stored) only means they may be printed again.
		if err := s.pos.Durable(meta.Partition, last); err != nil && !errors.Is(err, sdk.ErrCommitUnknownPartition) {
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
