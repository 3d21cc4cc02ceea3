package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:file".
const Name = "file"

// plugin_config fields.
const (
	// FieldPath: the file to append to (created with mode 0644 if missing, with its
	// directories). Required.
	FieldPath = "path"
	// FieldFlushInterval: how often the file is fsynced (and, in sink_controlled mode,
	// offsets committed), Go duration syntax ("1s", "250ms"); default "1s".
	FieldFlushInterval = "flush_interval"
	// FieldFsyncEachBatch: bool, default false; fsync before each Consume returns.
	FieldFsyncEachBatch = "fsync_each_batch"
)

// DefaultFlushInterval is flush_interval when unset.
const DefaultFlushInterval = time.Second

// Spec declares plugin_config; Open decodes with it and `ferry check` validates with it.
var Spec = sdk.ConfigSpec{Fields: []sdk.ConfigField{
	{Name: FieldPath, Type: sdk.TypeOutputPath, Required: true,
		Doc: "the file to append JSON lines to (created with mode 0644 if missing, with its directories)"},
	{Name: FieldFlushInterval, Type: sdk.TypeDuration, Default: sdk.FormatDuration(DefaultFlushInterval),
		Doc: "how often the file is fsynced (and, with sink_controlled, offsets committed)"},
	{Name: FieldFsyncEachBatch, Type: sdk.TypeBool, Default: false,
		Doc: "fsync before each batch is acknowledged"},
}}

// Config is the sink's plugin_config.
type Config struct {
	Path           string `json:"path"`
	FlushInterval  string `json:"flush_interval"`
	FsyncEachBatch bool   `json:"fsync_each_batch"`
}

// Record is the JSON object written for one message, in this field order.
type Record struct {
	Stream          string          `json:"stream"`
	Topic           string          `json:"topic"`
	Partition       uint32          `json:"partition"`
	Offset          uint64          `json:"offset"`
	ID              string          `json:"id"`        // 32 hex digits
	Timestamp       uint64          `json:"timestamp"` // µs since the epoch
	OriginTimestamp uint64          `json:"origin_timestamp"`
	Headers         []Header        `json:"headers"`
	Payload         json.RawMessage `json:"payload"` // JSON value (json schema), string (text), base64 string (other)
}

// Header is one user header in a Record. Key and Value are strings for string kinds and
// base64 of the raw little-endian bytes for every other kind.
type Header struct {
	Key   string `json:"key"`
	Kind  string `json:"kind"` // the value's kind: raw, string, bool, int8 … uint128, float32, float64
	Value string `json:"value"`
}

// Sink appends JSON lines to a file. Consume and Close are safe for concurrent use.
type Sink struct {
	cfg       Config
	interval  time.Duration
	committer sdk.Committer
	log       *slog.Logger

	mu      sync.Mutex // guards f, w, pending, closed, enc/buf
	f       *os.File
	w       *bufio.Writer
	pending map[sdk.Partition]uint64 // highest offset written since the last fsync snapshot
	closed  bool
	broken  error // set by a failed fsync: the kernel may have dropped the data, so never commit again
	buf     bytes.Buffer
	enc     *json.Encoder

	syncMu sync.Mutex // serializes fsync+commit rounds, so commits go out in order

	stop chan struct{}
	done chan struct{}
}

// New returns an unopened file sink.
func New() *Sink { return &Sink{} }

// Open reads plugin_config, opens the file for appending and starts the fsync goroutine.
func (s *Sink) Open(_ context.Context, env sdk.SinkEnv) error {
	if err := Spec.Decode(env.Config, &s.cfg); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	d, err := sdk.ParseDuration(s.cfg.FlushInterval)
	if err != nil || d <= 0 {
		return fmt.Errorf("file sink: plugin_config.flush_interval %q: want a positive duration like \"1s\"", s.cfg.FlushInterval)
	}
	s.interval = d
	if err := os.MkdirAll(filepath.Dir(s.cfg.Path), 0o755); err != nil {
		return fmt.Errorf("file sink: create the directory of %s: %w", s.cfg.Path, err)
	}
	f, err := os.OpenFile(s.cfg.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("file sink: open: %w", err)
	}
	s.f, s.w = f, bufio.NewWriterSize(f, 256<<10)
	s.enc = json.NewEncoder(&s.buf)
	s.enc.SetEscapeHTML(false)
	s.pending = map[sdk.Partition]uint64{}
	s.committer = env.Committer
	s.log = env.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.loop()
	return nil
}

func (s *Sink) loop() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if err := s.Sync(); err != nil {
				s.log.Error("file sink: periodic fsync failed", "path", s.cfg.Path, "err", err)
			}
		}
	}
}

// Consume appends one line per message and hands the batch to the OS before returning
// (fsynced too when fsync_each_batch is set).
func (s *Sink) Consume(_ context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	s.mu.Lock()
	if s.closed || s.f == nil {
		s.mu.Unlock()
		return errors.New("file sink: not open")
	}
	if s.broken != nil {
		s.mu.Unlock()
		return s.broken
	}
	for i := range msgs {
		if err := s.writeRecord(topic, meta, &msgs[i]); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	err := s.w.Flush()
	if err == nil && len(msgs) > 0 {
		last := msgs[len(msgs)-1].Offset
		if cur, ok := s.pending[meta.Partition]; !ok || last > cur {
			s.pending[meta.Partition] = last
		}
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("file sink: write: %w", err)
	}
	if s.cfg.FsyncEachBatch {
		return s.Sync()
	}
	return nil
}

func (s *Sink) writeRecord(topic sdk.TopicMetadata, meta sdk.MessagesMetadata, m *sdk.ConsumedMessage) error {
	rec := Record{
		Stream: topic.Stream, Topic: topic.Topic, Partition: meta.Partition.PartitionID, Offset: m.Offset,
		ID: m.ID.String(), Timestamp: m.Timestamp, OriginTimestamp: m.OriginTimestamp,
		Headers: make([]Header, 0, len(m.Headers)), Payload: payloadJSON(meta.Schema, m.Payload),
	}
	for _, h := range m.Headers {
		rec.Headers = append(rec.Headers, Header{Key: fieldText(h.Key), Kind: kindName(h.Value.Kind), Value: fieldText(h.Value)})
	}
	s.buf.Reset()
	if err := s.enc.Encode(&rec); err != nil {
		return fmt.Errorf("file sink: encode offset %d: %w", m.Offset, err)
	}
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return fmt.Errorf("file sink: write: %w", err)
	}
	return nil
}

func payloadJSON(schema sdk.Schema, p []byte) json.RawMessage {
	switch {
	case schema == sdk.SchemaJSON && json.Valid(p):
		var b bytes.Buffer
		if json.Compact(&b, p) == nil {
			return b.Bytes()
		}
	case schema == sdk.SchemaText && utf8.Valid(p):
		return quote(string(p))
	}
	return quote(base64.StdEncoding.EncodeToString(p))
}

func quote(s string) json.RawMessage {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a string always encodes
	return bytes.TrimRight(b.Bytes(), "\n")
}

func fieldText(f sdk.HeaderField) string {
	if f.Kind == sdk.HeaderString {
		return string(f.Value)
	}
	return base64.StdEncoding.EncodeToString(f.Value)
}

var kindNames = map[sdk.HeaderKind]string{
	sdk.HeaderRaw: "raw", sdk.HeaderString: "string", sdk.HeaderBool: "bool",
	sdk.HeaderInt8: "int8", sdk.HeaderInt16: "int16", sdk.HeaderInt32: "int32", sdk.HeaderInt64: "int64", sdk.HeaderInt128: "int128",
	sdk.HeaderUint8: "uint8", sdk.HeaderUint16: "uint16", sdk.HeaderUint32: "uint32", sdk.HeaderUint64: "uint64", sdk.HeaderUint128: "uint128",
	sdk.HeaderFloat32: "float32", sdk.HeaderFloat64: "float64",
}

func kindName(k sdk.HeaderKind) string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind%d", k)
}

// Sync flushes and fsyncs the file, then, in sink_controlled mode, commits per partition the
// highest offset that was written before the fsync. After a failed flush or fsync nothing is
// ever committed again and Consume and Sync return that error (the sink must be restarted,
// which redelivers from the last commit). Safe to call concurrently.
func (s *Sink) Sync() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	if s.f == nil {
		s.mu.Unlock()
		return nil
	}
	if s.broken != nil {
		s.mu.Unlock()
		return s.broken
	}
	err := s.w.Flush()
	snap := s.pending
	s.pending = map[sdk.Partition]uint64{}
	f := s.f
	s.mu.Unlock()
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		// After a failed fsync the kernel may have dropped the dirty pages, and a later fsync
		// can succeed without them (the "fsyncgate" problem): never commit anything again.
		err = fmt.Errorf("file sink: fsync %s: %w", s.cfg.Path, err)
		s.mu.Lock()
		s.broken = err
		s.mu.Unlock()
		return err
	}
	if s.committer != nil {
		for p, o := range snap {
			if cerr := s.committer.Commit(p, o); cerr != nil && !errors.Is(cerr, sdk.ErrCommitStale) {
				s.log.Warn("file sink: commit refused", "partition", p.PartitionID, "offset", o, "err", cerr)
			}
		}
	}
	return nil
}

// Close stops the fsync goroutine, flushes, fsyncs, commits (sink_controlled) and closes the
// file. It is idempotent; ctx is not needed (the work is local) but bounds nothing else.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	if s.closed || s.f == nil {
		s.closed = true
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	err := s.Sync()
	s.mu.Lock()
	cerr := s.f.Close()
	s.f = nil
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("file sink: close: %w", cerr)
	}
	return nil
}
