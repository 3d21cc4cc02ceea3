package file

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// config is the sink's plugin_config.
type config struct {
	Path           string
	FlushInterval  time.Duration
	FsyncEachBatch bool
}

// Config declares plugin_config: Open parses with it, `ferry check` validates with it and
// `ferry connectors` prints it. Under sink_controlled the sink commits what an fsync made
// durable (every flush_interval, and in Close).
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	f.Commits(sdk.CommitsWhenDurable)
	f.OutputPath("path", &c.Path).Required().
		Doc("the file to append JSON lines to (created with mode 0644 if missing, with its directories)")
	f.Duration("flush_interval", &c.FlushInterval).Default(time.Second).Check(positive).
		Doc("how often the file is fsynced (and, with sink_controlled, offsets committed)")
	f.Bool("fsync_each_batch", &c.FsyncEachBatch).Default(false).
		Doc("fsync before each batch is acknowledged")
})

// Spec is Config's spec, for the registry.
var Spec = Config.Spec()

func positive(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("want a positive duration like \"1s\", got %s", sdk.FormatDuration(d))
	}
	return nil
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
	cfg config
	log *slog.Logger
	pos *sdk.Positions // what is written per partition, committed after each fsync

	mu     sync.Mutex // guards f, closed, broken, enc/buf; orders each write with its pos.Written
	f      *os.File
	closed bool
	// broken is set by a failed fsync (the kernel may have dropped the data, so never
	// commit again) and by a failed write that could not be truncated away (never
	// append after a partial record).
	broken error
	buf    bytes.Buffer // the batch being written, encoded
	enc    *json.Encoder

	syncMu sync.Mutex // serializes fsync+commit rounds, so commits go out in order

	stop chan struct{}
	done chan struct{}
}

// New returns an unopened file sink.
func New() *Sink { return &Sink{} }

// Open reads plugin_config, opens the file for appending and starts the fsync goroutine.
func (s *Sink) Open(_ context.Context, env sdk.SinkEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("file sink: %w", err))
	}
	s.cfg, s.log = cfg, env.Logger
	if err := os.MkdirAll(filepath.Dir(s.cfg.Path), 0o755); err != nil {
		return fmt.Errorf("file sink: create the directory of %s: %w", s.cfg.Path, err)
	}
	f, err := os.OpenFile(s.cfg.Path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("file sink: open: %w", err)
	}
	if err := s.dropPartialTail(f); err != nil {
		_ = f.Close()
		return err
	}
	s.f = f
	s.enc = json.NewEncoder(&s.buf)
	s.enc.SetEscapeHTML(false)
	s.pos = sdk.NewPositions(env, nil)
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.loop()
	return nil
}

func (s *Sink) loop() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.FlushInterval)
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
// (fsynced too when fsync_each_batch is set). The batch is written whole or not at all:
// a failed or partial write (a full disk) is truncated away before Consume returns its
// error, so the file always ends with a complete record and a retry appends cleanly.
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
	s.buf.Reset()
	for i := range msgs {
		if err := s.encodeRecord(topic, meta, &msgs[i]); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	err := s.appendLocked()
	if err == nil && len(msgs) > 0 {
		// Every batch is written (no Fresh): Positions follows the partition's batches in
		// their order, so the next flush commits this batch's last offset, even below an
		// earlier one: after the partition went back (a purge) the highest offset seen
		// would be a purged message's, above what was written since.
		s.pos.Written(meta.Partition, msgs[len(msgs)-1].Offset)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if s.cfg.FsyncEachBatch {
		return s.Sync()
	}
	return nil
}

// appendLocked writes the encoded batch at the end of the file. The file's size is read
// first; if the write fails, even after writing part of the batch, the file is truncated
// back to that size (its last complete record). If the truncate fails as well, the error
// says so and the sink is broken: nothing is appended after a partial record (the next
// Open removes it).
func (s *Sink) appendLocked() error {
	if s.buf.Len() == 0 {
		return nil
	}
	size, err := s.f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("file sink: size of %s before a write: %w", s.cfg.Path, err)
	}
	n, err := s.f.Write(s.buf.Bytes())
	if err == nil {
		return nil
	}
	werr := fmt.Errorf("file sink: write %s (%d of the batch's %d bytes written): %w", s.cfg.Path, n, s.buf.Len(), err)
	if terr := s.f.Truncate(size); terr != nil {
		s.broken = fmt.Errorf("%w; truncating it back to %d bytes (its last complete record) failed too, so it ends with a partial record: %w",
			werr, size, terr)
		return s.broken
	}
	return werr
}

// dropPartialTail truncates f after its last newline when it does not end with one: a
// record whose write was cut short (the process was killed, or a truncate after a failed
// write failed). That record was never acknowledged, so it is redelivered.
func (s *Sink) dropPartialTail(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("file sink: stat %s: %w", s.cfg.Path, err)
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	buf := make([]byte, 64<<10)
	keep := int64(0) // bytes up to and including the last newline
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil {
			return fmt.Errorf("file sink: read the end of %s: %w", s.cfg.Path, err)
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			keep = start + int64(i) + 1
			break
		}
		end = start
	}
	if keep == size {
		return nil
	}
	if err := f.Truncate(keep); err != nil {
		return fmt.Errorf("file sink: %s ends with a partial record (%d bytes after its last complete line) that cannot be removed: %w",
			s.cfg.Path, size-keep, err)
	}
	s.log.Warn("file sink: removed a partial record at the end of the file (a write cut short before this start)",
		"path", s.cfg.Path, "bytes", size-keep, "size", keep)
	return nil
}

// encodeRecord appends m's line to the batch buffer.
func (s *Sink) encodeRecord(topic sdk.TopicMetadata, meta sdk.MessagesMetadata, m *sdk.ConsumedMessage) error {
	rec := Record{
		Stream: topic.Stream, Topic: topic.Topic, Partition: meta.Partition.PartitionID, Offset: m.Offset,
		ID: m.ID.String(), Timestamp: m.Timestamp, OriginTimestamp: m.OriginTimestamp,
		Headers: make([]Header, 0, len(m.Headers)), Payload: payloadJSON(meta.Schema, m.Payload),
	}
	for _, h := range m.Headers {
		rec.Headers = append(rec.Headers, Header{Key: fieldText(h.Key), Kind: kindName(h.Value.Kind), Value: fieldText(h.Value)})
	}
	if err := s.enc.Encode(&rec); err != nil { // writes nothing on error
		return fmt.Errorf("file sink: encode offset %d: %w", m.Offset, err)
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

// Sync fsyncs the file, then, in sink_controlled mode, commits per partition the last
// offset written before the fsync. After a failed fsync nothing is ever committed again
// and Consume and Sync return that error (the sink must be restarted, which redelivers
// from the last commit). A commit the runtime refuses is logged, not returned. Safe to
// call concurrently.
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
	written := s.pos.Mark() // what the fsync below makes durable
	f := s.f
	s.mu.Unlock()
	if err := f.Sync(); err != nil {
		// After a failed fsync the kernel may have dropped the dirty pages, and a later fsync
		// can succeed without them (the "fsyncgate" problem): never commit anything again.
		err = fmt.Errorf("file sink: fsync %s: %w", s.cfg.Path, err)
		s.mu.Lock()
		s.broken = err
		s.mu.Unlock()
		return err
	}
	if err := written.Synced(); err != nil {
		s.log.Warn("file sink: commit refused", "path", s.cfg.Path, "err", err)
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
