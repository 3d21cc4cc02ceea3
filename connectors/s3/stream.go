package s3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// A large object streams through a multipart upload instead of sitting in memory. Once a
// partition buffers part_size bytes and its object is not yet full, the sink starts a
// multipart upload and from then on sends a part whenever part_size encoded bytes are
// ready. S3 names an object when its upload starts and cannot rename it, while the key
// names the object's last offset, known only when the object ends (by size, count,
// flush_interval, the memory cap or a stop). So the upload goes to a partial key that is
// never an object key (<partition>-<first>.<random>.partial, ignored by the listing on
// assignment); when the object ends, the partial object is completed and copied inside
// the server (UploadPartCopy of the same part ranges, no bytes through the sink) to the
// final key, that copy completed with If-None-Match: *, and only then is the last offset
// committed and the partial object deleted. A crash, a revoke or a failure before that
// copy completes leaves nothing the listing counts and nothing committed: the messages
// are polled again, and the partition's next assignment aborts the upload or deletes the
// partial object left behind.

// encodeChunk is how many parquet rows a streamed object buffers before encoding them.
const encodeChunk = 1024

// stream is a partition's object under a multipart upload.
type stream struct {
	tmp    string // the partial object's key
	id     string // the upload id
	etags  []string
	sizes  []int64
	part   partBuf    // parquet: encoded bytes not yet sent (the JSON formats use the buffer's data)
	enc    rowEncoder // parquet
	sealed bool       // every part sent and the partial object complete: only the copy is left
}

// partBuf collects the encoder's output until a part is full.
type partBuf struct{ b []byte }

func (p *partBuf) Write(b []byte) (int, error) { p.b = append(p.b, b...); return len(b), nil }

// partialKey is the key a streamed object is uploaded under before it is copied to its
// object key: the object key's directory, the partition, the first offset and a random
// token (two owners of a partition never share one).
func (s *Sink) partialKey(ps *partState) string {
	b := &ps.buf
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	kc := keyCtx{stream: ps.topic.Stream, topic: ps.topic.Topic, partition: ps.part.PartitionID, firstTS: b.firstTS}
	file := fmt.Sprintf("%05d-%020d.%s.partial", kc.partition, b.first, hex.EncodeToString(tok[:]))
	return joinKey(s.cfg.Prefix, s.tpl.render(kc), file)
}

// startLocked starts streaming ps's object: a multipart upload is created under a partial
// key and the buffer is fed to it.
func (s *Sink) startLocked(ctx context.Context, ps *partState) error {
	if err := s.settleLocked(ctx, ps, true); err != nil {
		return err
	}
	if s.revokedLocked(ps) {
		return nil
	}
	tmp := s.partialKey(ps)
	var id string
	err := s.attempt(ctx, tmp, func() (err error) {
		id, err = s.st.create(ctx, tmp, contentType(s.cfg.Format), nil)
		return err
	})
	if err != nil {
		return err // the buffer is kept: the next message or retried batch starts again
	}
	up := &stream{tmp: tmp, id: id}
	if s.cfg.Format == formatParquet {
		up.enc = newRowEncoder(&s.cfg, ps.buf.schema, &up.part, int(s.cfg.PartSize))
	}
	ps.up = up
	s.log.Debug("s3 sink: streaming an object", "partial_key", tmp, "first", ps.buf.first)
	return s.feedLocked(ctx, ps)
}

// feedLocked encodes ps's buffered rows in chunks and sends a part once part_size encoded
// bytes are ready. A part that fails max_attempts times stays in memory and is sent again
// by the next call.
func (s *Sink) feedLocked(ctx context.Context, ps *partState) error {
	up, b := ps.up, &ps.buf
	if up.enc != nil && len(b.rows) >= encodeChunk {
		if err := s.encodeLocked(ctx, ps); err != nil {
			return err
		}
	}
	if len(s.pending(ps)) >= int(s.cfg.PartSize) {
		return s.sendPartLocked(ctx, ps, s.pending(ps))
	}
	return nil
}

// encodeLocked hands the buffered rows to the parquet encoder.
func (s *Sink) encodeLocked(ctx context.Context, ps *partState) error {
	b := &ps.buf
	if err := ps.up.enc.write(b.rows); err != nil {
		return s.failStreamLocked(ctx, ps, fmt.Errorf("encode parquet (offsets %d-%d): %w", b.first, b.last, err))
	}
	clear(b.rows)
	b.rows = b.rows[:0]
	return nil
}

// finishLocked ends ps's streamed object: the last part is sent, the partial object
// completed and copied to the object key (If-None-Match: *), the partial object deleted,
// and the last offset committed. A failure leaves the step reached: the next call goes on
// from there.
func (s *Sink) finishLocked(ctx context.Context, ps *partState) error {
	up, b := ps.up, &ps.buf
	if s.revokedLocked(ps) {
		return nil
	}
	if !up.sealed {
		if up.enc != nil {
			if len(b.rows) > 0 {
				if err := s.encodeLocked(ctx, ps); err != nil {
					return err
				}
			}
			if err := up.enc.close(); err != nil {
				return s.failStreamLocked(ctx, ps, fmt.Errorf("encode parquet (offsets %d-%d): %w", b.first, b.last, err))
			}
			up.enc = nil // closed: a retry after a failed last part sends what it wrote
		}
		body := s.pending(ps)
		if s.cfg.Format == formatJSONArray {
			body = b.finish(&s.cfg) // the closing bracket, after what is pending
		}
		if len(body) > 0 || len(up.etags) == 0 {
			if err := s.sendPartLocked(ctx, ps, body); err != nil || ps.gone {
				return err
			}
		}
		err := s.attempt(ctx, up.tmp, func() error { return s.st.complete(ctx, up.tmp, up.id, up.etags, false) })
		if errors.Is(err, errNoUpload) {
			// Aborted by the partition's next owner, or completed by an attempt whose
			// answer was lost: the bucket says which.
			ok, herr := s.st.exists(ctx, up.tmp)
			if herr != nil {
				return fmt.Errorf("s3 sink: %w", herr)
			}
			if !ok {
				s.lostLocked(ctx, ps)
				return nil
			}
		} else if err != nil {
			return err
		}
		up.sealed = true
	}
	key := objectKey(s.cfg.Prefix, s.tpl, keyCtx{stream: ps.topic.Stream, topic: ps.topic.Topic,
		partition: ps.part.PartitionID, firstTS: b.firstTS, gen: ps.gen}, b.first, b.last, s.cfg.Format)
	ident := ps.identity()
	err := s.attempt(ctx, key, func() error { return s.st.copy(ctx, up.tmp, key, contentType(s.cfg.Format), up.sizes, ident) })
	switch {
	case errors.Is(err, errExists):
		s.log.Info("s3 sink: object already in the bucket (its metadata names this range); counted as written", "key", key)
	case errors.Is(err, errNoUpload): // the partial object was deleted by the partition's next owner
		s.lostLocked(ctx, ps)
		return nil
	case err != nil:
		return err
	}
	s.removePartial(ctx, up.tmp)
	s.log.Debug("s3 sink: uploaded", "key", key, "parts", len(up.etags))
	last := b.last
	s.clearLocked(ps)
	s.commitLocked(ps, last, key)
	return nil
}

// lostLocked releases a partition whose upload another owner aborted or deleted: the
// partition was assigned elsewhere, and that owner writes these offsets.
func (s *Sink) lostLocked(ctx context.Context, ps *partState) {
	s.log.Info("s3 sink: multipart upload removed by another owner of the partition; partition released",
		"partial_key", ps.up.tmp, "partition", ps.part.PartitionID)
	s.releaseLocked(ctx, ps)
}

// pending is the encoded bytes of ps's streamed object not yet sent.
func (s *Sink) pending(ps *partState) []byte {
	if s.cfg.Format == formatParquet {
		return ps.up.part.b
	}
	return ps.buf.data
}

// sendPartLocked sends body as the next part and forgets it.
func (s *Sink) sendPartLocked(ctx context.Context, ps *partState, body []byte) error {
	up := ps.up
	n := int32(len(up.etags) + 1)
	var etag string
	err := s.attempt(ctx, up.tmp, func() (err error) {
		etag, err = s.st.part(ctx, up.tmp, up.id, n, body)
		return err
	})
	if errors.Is(err, errNoUpload) {
		s.lostLocked(ctx, ps)
		return nil
	}
	if err != nil {
		return err
	}
	up.etags = append(up.etags, etag)
	up.sizes = append(up.sizes, int64(len(body)))
	up.part.b = up.part.b[:0]
	ps.buf.data = ps.buf.data[:0]
	s.buffered.Add(-int64(ps.buf.size))
	ps.buf.size = 0
	ps.size.Store(0)
	return nil
}

// failStreamLocked gives up a streamed object whose encoding failed: its messages are no
// longer in memory and were never committed, so the partition is released (its next
// assignment polls them again) and the error is returned.
func (s *Sink) failStreamLocked(ctx context.Context, ps *partState, err error) error {
	s.releaseLocked(ctx, ps)
	return fmt.Errorf("s3 sink: partition %d released: %w", ps.part.PartitionID, err)
}

// releaseLocked aborts ps's upload or deletes its partial object, drops its buffer and
// stops accepting its messages: nothing past its last commit is written by this
// assignment.
func (s *Sink) releaseLocked(ctx context.Context, ps *partState) {
	if up := ps.up; up != nil {
		ctx, cancel := cleanupCtx(ctx)
		defer cancel()
		if up.sealed {
			s.removePartial(ctx, up.tmp)
		} else if err := s.st.abort(ctx, up.tmp, up.id); err != nil {
			s.log.Warn("s3 sink: abort failed; the partition's next assignment aborts it", "partial_key", up.tmp, "err", err)
		}
	}
	if f := ps.inflight; f != nil {
		// Its upload ends by itself.
		s.free(f)
		ps.inflight = nil
	}
	s.clearLocked(ps)
	ps.gone = true
}

// cleanupCtx is ctx, or when ctx is done (a stop), a context of its own for ten seconds.
func cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

// removePartial deletes a partial object, logging a failure: the partition's next
// assignment deletes what is left. A stop that lands between the copy and this delete
// does not cancel it (a graceful stop leaves no partial object behind).
func (s *Sink) removePartial(ctx context.Context, key string) {
	ctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if err := s.st.remove(ctx, key); err != nil {
		s.log.Warn("s3 sink: delete of a partial object failed; the partition's next assignment deletes it", "partial_key", key, "err", err)
	}
}

// clearLocked empties ps's buffer and forgets its stream.
func (s *Sink) clearLocked(ps *partState) {
	s.buffered.Add(-int64(ps.buf.size))
	ps.buf.reset()
	ps.size.Store(0)
	ps.up = nil
}

// abandoned removes what an earlier owner of f's partition left of a streamed object:
// incomplete multipart uploads under the partition's keys and partial objects (their
// messages were never committed, or are in the object they were copied to).
func (s *Sink) abandoned(ctx context.Context, f finder, partials []string) error {
	type upload struct{ key, id string }
	var ups []upload
	err := s.st.uploads(ctx, f.listPrefix, func(key, id string) {
		if f.partial(key) {
			ups = append(ups, upload{key, id})
		} else if _, _, ok := f.offsets(key); ok {
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
	for _, k := range partials {
		if err := s.st.remove(ctx, k); err != nil {
			return err
		}
		s.log.Info("s3 sink: partial object of an earlier owner deleted", "key", k)
	}
	return nil
}
