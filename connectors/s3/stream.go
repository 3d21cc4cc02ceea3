package s3

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// A large object streams through a multipart upload: once a partition buffers part_size
// bytes and its object is not yet full, the sink fixes the object's last offset, starts a
// multipart upload under the key naming it, and from then on sends a part whenever
// part_size encoded bytes are ready, completing the upload (If-None-Match: *) when the
// planned last offset has been added. S3 names an object when its upload starts and
// cannot rename it, so the last offset must be known then: it is first +
// max_messages_per_file - 1, or, with size rotation, as many messages as max_file_size
// holds at the average size buffered so far (whichever is smaller). Iggy's offsets are
// dense, so the planned offset always comes. Nothing of a streamed object is committed
// before the upload completes: a crash, a revoke or a stop leaves an incomplete upload,
// invisible to LIST, whose messages are polled again; the next assignment of the
// partition aborts it.

// encodeChunk is how many parquet rows a streamed object buffers before encoding them.
const encodeChunk = 1024

// stream is a partition's object under a multipart upload.
type stream struct {
	key   string
	id    string // the upload id
	last  uint64 // the planned last offset, named by key
	etags []string
	part  partBuf    // parquet: encoded bytes not yet sent (the JSON formats use the buffer's data)
	enc   rowEncoder // parquet
	held  int64      // bytes of this object counted in the sink's buffered total
}

// partBuf collects the encoder's output until a part is full.
type partBuf struct{ b []byte }

func (p *partBuf) Write(b []byte) (int, error) { p.b = append(p.b, b...); return len(b), nil }

// plannedLast is the last offset of the object ps's buffer starts, chosen when it starts
// streaming.
func (s *Sink) plannedLast(b *buffer) uint64 {
	n := s.cfg.maxMessages
	if s.cfg.maxBytes != math.MaxUint64 && b.size > 0 {
		est := (s.cfg.maxBytes*b.count + b.size - 1) / b.size // bytes per message so far
		n = min(n, max(est, 1))
	}
	last := b.first + n - 1
	if n > math.MaxUint64-b.first {
		last = math.MaxUint64
	}
	return max(last, b.last+1)
}

// startLocked starts streaming ps's object: the multipart upload is created under the key
// of the planned range and the buffer is fed to it.
func (s *Sink) startLocked(ctx context.Context, ps *partState) error {
	b := &ps.buf
	if s.revokedLocked(ps) {
		return nil
	}
	last := s.plannedLast(b)
	kc := keyCtx{stream: ps.topic.Stream, topic: ps.topic.Topic, partition: ps.part.PartitionID, firstTS: b.firstTS}
	key := objectKey(s.cfg.Prefix, s.tpl, kc, b.first, last, s.cfg.format)
	var id string
	err := s.attempt(ctx, key, func() (err error) {
		id, err = s.st.create(ctx, key, contentType(s.cfg.format))
		return err
	})
	if err != nil {
		return err // the buffer is kept: the next message or retried batch starts again
	}
	up := &stream{key: key, id: id, last: last}
	if s.cfg.format == FormatParquet {
		up.enc = newRowEncoder(&s.cfg, b.schema, &up.part)
	}
	ps.up = up
	ps.size.Store(0) // a streamed object cannot be uploaded early: the memory cap skips it
	s.log.Debug("s3 sink: streaming an object", "key", key, "first", b.first, "planned_last", last)
	return s.feedLocked(ctx, ps, false)
}

// feedLocked moves ps's streamed object along: it encodes the buffered rows, sends a full
// part, and completes the upload once the planned last offset was added or passed (end).
// A part that fails max_attempts times stays in memory and is sent again by the next call.
func (s *Sink) feedLocked(ctx context.Context, ps *partState, end bool) error {
	up, b := ps.up, &ps.buf
	end = end || ps.next > up.last
	if up.enc != nil && len(b.rows) > 0 && (end || len(b.rows) >= encodeChunk) {
		if err := up.enc.write(b.rows); err != nil {
			return s.failStreamLocked(ctx, ps, fmt.Errorf("encode parquet (offsets %d-%d): %w", b.first, b.last, err))
		}
		clear(b.rows)
		b.rows = b.rows[:0]
	}
	held := s.cfg.format != FormatParquet && len(b.data) >= int(s.cfg.partSize) ||
		up.enc != nil && len(up.part.b) >= int(s.cfg.partSize)
	if held {
		if err := s.sendPartLocked(ctx, ps, s.pending(ps)); err != nil {
			return err
		}
	}
	if !end {
		return nil
	}
	if s.revokedLocked(ps) {
		return nil
	}
	if up.enc != nil {
		if err := up.enc.close(); err != nil {
			return s.failStreamLocked(ctx, ps, fmt.Errorf("encode parquet (offsets %d-%d): %w", b.first, b.last, err))
		}
		up.enc = nil // closed: a retry after a failed last part sends what it wrote
	}
	body := s.pending(ps)
	if s.cfg.format == FormatJSONArray {
		body = b.finish(&s.cfg) // the closing bracket, after what is pending
	}
	if len(body) > 0 || len(up.etags) == 0 {
		if err := s.sendPartLocked(ctx, ps, body); err != nil {
			return err
		}
	}
	err := s.attempt(ctx, up.key, func() error { return s.st.complete(ctx, up.key, up.id, up.etags) })
	switch {
	case errors.Is(err, errExists):
		// Another owner wrote this range under the same key first: ours is redundant.
		s.log.Info("s3 sink: object already in the bucket; counted as written", "key", up.key)
		s.abortLocked(ctx, up)
	case errors.Is(err, errNoUpload):
		// Aborted by the partition's next owner, or completed by an attempt whose answer
		// was lost: the bucket says which.
		ok, herr := s.st.exists(ctx, up.key)
		if herr != nil {
			return fmt.Errorf("s3 sink: %w", herr)
		}
		if !ok {
			s.log.Info("s3 sink: multipart upload aborted by another owner of the partition; partition released",
				"key", up.key, "partition", ps.part.PartitionID)
			s.releaseLocked(ctx, ps)
			return nil
		}
	case err != nil:
		return err // every part is sent: the next call completes again
	}
	s.log.Debug("s3 sink: uploaded", "key", up.key, "parts", len(up.etags))
	last := up.last
	s.clearLocked(ps)
	s.commitLocked(ps, last, up.key)
	return nil
}

// pending is the encoded bytes of ps's streamed object not yet sent.
func (s *Sink) pending(ps *partState) []byte {
	if s.cfg.format == FormatParquet {
		return ps.up.part.b
	}
	return ps.buf.data
}

// sendPartLocked sends body as the next part and forgets it.
func (s *Sink) sendPartLocked(ctx context.Context, ps *partState, body []byte) error {
	up := ps.up
	n := int32(len(up.etags) + 1)
	var etag string
	err := s.attempt(ctx, up.key, func() (err error) {
		etag, err = s.st.part(ctx, up.key, up.id, n, body)
		return err
	})
	if errors.Is(err, errNoUpload) {
		s.log.Info("s3 sink: multipart upload aborted by another owner of the partition; partition released",
			"key", up.key, "partition", ps.part.PartitionID)
		s.releaseLocked(ctx, ps)
		return nil
	}
	if err != nil {
		return err
	}
	up.etags = append(up.etags, etag)
	up.part.b = up.part.b[:0]
	ps.buf.data = ps.buf.data[:0]
	s.buffered.Add(-int64(ps.buf.size))
	ps.buf.size = 0
	return nil
}

// failStreamLocked gives up a streamed object whose encoding failed: its messages are no
// longer in memory and were never committed, so the partition is released (its next
// assignment polls them again) and the error is returned.
func (s *Sink) failStreamLocked(ctx context.Context, ps *partState, err error) error {
	s.releaseLocked(ctx, ps)
	return fmt.Errorf("s3 sink: partition %d released: %w", ps.part.PartitionID, err)
}

// releaseLocked aborts ps's upload, if any, drops its buffer and stops accepting its
// messages: nothing past its last commit is written by this assignment.
func (s *Sink) releaseLocked(ctx context.Context, ps *partState) {
	if ps.up != nil {
		s.abortLocked(ctx, ps.up)
	}
	s.clearLocked(ps)
	ps.gone = true
}

// clearLocked empties ps's buffer and forgets its stream.
func (s *Sink) clearLocked(ps *partState) {
	s.buffered.Add(-int64(ps.buf.size))
	ps.buf.reset()
	ps.size.Store(0)
	ps.up = nil
}

// abortLocked aborts an upload, logging a failure: the partition's next assignment
// aborts what is left.
func (s *Sink) abortLocked(ctx context.Context, up *stream) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
	}
	if err := s.st.abort(ctx, up.key, up.id); err != nil {
		s.log.Warn("s3 sink: abort failed; the partition's next assignment aborts it", "key", up.key, "err", err)
		return
	}
	s.log.Debug("s3 sink: multipart upload aborted", "key", up.key, "parts", len(up.etags))
}

// abandoned aborts every incomplete multipart upload of f's partition: an earlier owner's
// object whose messages were never committed.
func (s *Sink) abandoned(ctx context.Context, f finder) error {
	type upload struct{ key, id string }
	var ups []upload
	err := s.st.uploads(ctx, f.listPrefix, func(key, id string) {
		if _, _, ok := f.offsets(key); ok {
			ups = append(ups, upload{key, id})
		}
	})
	if err != nil {
		return err
	}
	for _, u := range ups {
		if err := s.st.abort(ctx, u.key, u.id); err != nil {
			return err
		}
		s.log.Info("s3 sink: incomplete multipart upload of an earlier owner aborted", "key", u.key)
	}
	return nil
}
