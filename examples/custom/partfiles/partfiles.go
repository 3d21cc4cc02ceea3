// Package partfiles is an example Go sink for a custom Ferry build: it appends each
// partition's messages to a file of its own, one line per message, and commits a
// partition's offset only once its file is fsynced (offset_commit = "sink_controlled").
//
// Its guarantee is at least once: messages written but not yet committed when the process
// dies are delivered again, so a line may repeat after a crash. The file of stream S,
// topic T, partition P is DIR/S.T.P.log; each line is the message's offset, a space and
// its payload as a Go-quoted string. A crash may leave an unfinished last line: the file's
// first use cuts it off before appending.
package partfiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/ferryio/ferry/sdk"
)

// Name is the connector's name: path = "builtin:partfiles".
const Name = "partfiles"

// config is the sink's plugin_config.
type config struct {
	Dir string
}

// Config declares plugin_config, that the sink runs only with offset_commit =
// "sink_controlled" (a file without the key runs with it; one with another mode is refused
// before Open) and that it commits each batch once fsynced: Open parses with it, `ferry
// check` and the start validate with it and `ferry connectors` prints it.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	f.CommitModes("sink_controlled")
	f.Commits(sdk.CommitsEachBatch)
	f.String("dir", &c.Dir).Required().NonEmpty().Doc("the directory of the partition files (created if missing)")
})

// Spec is Config's spec, given to ferrycli.CLI.AddSink.
var Spec = Config.Spec()

// Sink writes partition files. Consume may be called concurrently for different topics;
// each file has its own lock.
type Sink struct {
	dir string
	pos *sdk.Positions // commits each partition's batches once fsynced

	mu    sync.Mutex // guards files
	files map[sdk.Partition]*partFile
}

type partFile struct {
	mu   sync.Mutex // guards f, size
	f    *os.File
	size int64 // bytes of whole lines in f
}

// New returns an unopened sink: the factory given to ferrycli.CLI.AddSink.
func New() sdk.Sink { return &Sink{} }

// Open reads plugin_config. The sink decides when offsets advance, so it refuses to run
// without a Committer: permanently, since no retry will give it one.
func (s *Sink) Open(_ context.Context, env sdk.SinkEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("partfiles: %w", err))
	}
	if env.Committer == nil {
		return sdk.Permanent(errors.New(`partfiles: needs offset_commit = "sink_controlled"`))
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("partfiles: create %s: %w", cfg.Dir, err)
	}
	s.dir, s.pos = cfg.Dir, sdk.NewPositions(env, nil)
	s.files = map[sdk.Partition]*partFile{}
	return nil
}

// Consume appends the batch to its partition's file, fsyncs it and commits the batch's
// last offset. A failed write is cut off the file and returned: the runtime retries the
// batch with backoff, then applies on_failure.
func (s *Sink) Consume(_ context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	pf, err := s.file(topic, meta.Partition)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	for _, m := range msgs {
		b.WriteString(strconv.FormatUint(m.Offset, 10))
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(string(m.Payload)))
		b.WriteByte('\n')
	}
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if _, err := pf.f.Write(b.Bytes()); err != nil {
		// Cut the partial batch, so a retry appends whole lines after whole lines.
		if terr := pf.f.Truncate(pf.size); terr != nil {
			return sdk.Permanent(fmt.Errorf("partfiles: write %s: %w; cutting it back: %w", pf.f.Name(), err, terr))
		}
		if _, serr := pf.f.Seek(pf.size, io.SeekStart); serr != nil {
			return sdk.Permanent(fmt.Errorf("partfiles: write %s: %w; seeking back: %w", pf.f.Name(), err, serr))
		}
		return fmt.Errorf("partfiles: write %s: %w", pf.f.Name(), err)
	}
	pf.size += int64(b.Len())
	if err := pf.f.Sync(); err != nil {
		// After a failed fsync the kernel may have dropped the pages: never commit what
		// this file holds; stop, and let the operator look.
		return sdk.Permanent(fmt.Errorf("partfiles: fsync %s: %w", pf.f.Name(), err))
	}
	// Durable: the offset may advance (a redelivery's commit is stale: no error). A
	// partition no longer ours (a rebalance) keeps its lines; its next owner resumes from
	// the stored offset.
	if err := s.pos.Durable(meta.Partition, msgs[len(msgs)-1].Offset); err != nil && !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		return fmt.Errorf("partfiles: commit: %w", err)
	}
	return nil
}

// file returns the open file of partition p, opening it on first use.
func (s *Sink) file(topic sdk.TopicMetadata, p sdk.Partition) (*partFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pf, ok := s.files[p]; ok {
		return pf, nil
	}
	path := filepath.Join(s.dir, fmt.Sprintf("%s.%s.%d.log", topic.Stream, topic.Topic, p.PartitionID))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("partfiles: open %s: %w", path, err)
	}
	size, err := seekPastLastLine(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("partfiles: %s: %w", path, err)
	}
	pf := &partFile{f: f, size: size}
	s.files[p] = pf
	return pf, nil
}

// seekPastLastLine cuts an unfinished last line (a write a crash interrupted) and leaves
// the offset at the end of the file, whose size it returns.
func seekPastLastLine(f *os.File) (int64, error) {
	b, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	keep := int64(bytes.LastIndexByte(b, '\n') + 1)
	if keep < int64(len(b)) {
		if err := f.Truncate(keep); err != nil {
			return 0, err
		}
	}
	_, err = f.Seek(keep, io.SeekStart)
	return keep, err
}

// Close closes every file. Each batch was fsynced and committed in Consume, so nothing is
// left to flush.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, pf := range s.files {
		pf.mu.Lock()
		errs = append(errs, pf.f.Close())
		pf.mu.Unlock()
	}
	s.files = nil
	return errors.Join(errs...)
}
