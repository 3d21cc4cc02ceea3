package server

import (
	"context"
	"fmt"
	"time"

	"github.com/ferryio/ferry/server/store"
)

// Retention: the segment cleaner of Iggy's [data_maintenance.messages]. Every
// Config.RetentionInterval it removes, per topic, the whole segments that
// message_expiry or max_topic_size no longer allow (store.EnforceRetention
// has the rules). A poll below the retained range then starts at the first
// retained message, as upstream.

// EnforceRetention runs one retention pass now (at Config.Now) and returns
// what it removed; the background cleaner runs the same pass every
// Config.RetentionInterval. It is safe for concurrent use; ctx is checked
// before the pass only. Errors: ErrClosed before Start or after Close, the
// store's error.
func (s *Server) EnforceRetention(ctx context.Context) (store.Removed, error) {
	if err := ctx.Err(); err != nil {
		return store.Removed{}, err
	}
	s.mu.Lock()
	st, closing := s.st, s.closing
	s.mu.Unlock()
	if st == nil || closing {
		return store.Removed{}, ErrClosed
	}
	r, err := st.EnforceRetention(s.cfg.Now())
	if r.Segments > 0 {
		s.log.Info("retention removed segments", "segments", r.Segments, "messages", r.Messages, "bytes", r.Bytes)
	}
	if err != nil {
		return r, fmt.Errorf("server: retention: %w", err)
	}
	return r, nil
}

// retentionLoop runs EnforceRetention every Config.RetentionInterval until Close.
func (s *Server) retentionLoop() {
	t := time.NewTicker(s.cfg.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			if _, err := s.EnforceRetention(context.Background()); err != nil {
				s.log.Warn("retention pass failed", "err", err)
			}
		}
	}
}
