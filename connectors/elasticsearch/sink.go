package elasticsearch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Sink indexes each message as one document with the _bulk API (see the package
// comment). Consume is safe for concurrent use: one caller per topic, and several
// partitions of a topic at once (max_in_flight).
type Sink struct {
	cfg   config
	key   string
	where string // the cluster's address for messages (a password in it hidden)
	log   *slog.Logger
	tmpl  indexTemplate
	cl    *client
	pos   *sdk.Positions
	retry sdk.Retry

	mu    sync.Mutex
	ready map[string]bool // indexes known to exist (or created)

	indexed, refused, retried atomic.Uint64
}

var (
	_ sdk.Sink           = (*Sink)(nil)
	_ sdk.ConcurrentSink = (*Sink)(nil)
	_ sdk.Preflighter    = (*Sink)(nil)
)

// New returns an unopened sink.
func New() *Sink { return &Sink{} }

// Open parses the config, checks that the cluster answers at url and takes the
// credentials, and, for an index that is not a template, that it exists or creates it.
// A configuration or credentials the cluster refuses are sdk.Permanent; an unreachable
// cluster is not (the runtime opens the sink again with backoff).
func (s *Sink) Open(ctx context.Context, env sdk.SinkEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("elasticsearch sink: %w", err))
	}
	if env.Committer == nil {
		return sdk.Permanent(errors.New(`elasticsearch sink: offset_commit = "sink_controlled" is required (the sink commits a partition's offsets once every document up to them landed)`))
	}
	s.cfg, s.key, s.log = cfg, env.Key, env.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.tmpl, err = parseIndexTemplate(cfg.Index); err != nil {
		return sdk.Permanent(fmt.Errorf("elasticsearch sink: plugin_config.index: %w", err))
	}
	s.cl = newClient(cfg)
	s.where = s.cl.where
	s.ready = map[string]bool{}
	s.pos = sdk.NewPositions(env, nil)
	s.retry = sdk.Retry{Initial: cfg.RetryBackoff, Max: 10 * time.Second, Attempts: cfg.MaxAttempts, Jitter: 0.2,
		What: "elasticsearch request", Log: s.log, LogAttrs: []any{"url", s.where},
		OnRetry: func(sdk.RetryEvent) { s.retried.Add(1) }}
	if cfg.DocumentID == idNone {
		s.log.Warn(`elasticsearch sink with document_id = "none": the cluster picks the ids, so a batch indexed again after a crash is indexed twice (at least once)`)
	}
	var info nodeInfo
	if err := s.retry.Do(ctx, func(ctx context.Context, _ int) error {
		var err error
		info, err = s.cl.info(ctx)
		return err
	}); err != nil {
		return err
	}
	if name, ok := s.tmpl.static(); ok {
		if err := s.ensureIndex(ctx, name); err != nil {
			return err
		}
	}
	s.log.Info("elasticsearch sink open", "url", s.where, "distribution", info.distribution(), "version", info.Version.Number,
		"index", cfg.Index, "document_id", string(cfg.DocumentID), "batch_size", cfg.BatchSize)
	return nil
}

// MaxInFlight implements sdk.ConcurrentSink: partitions are indexed independently.
func (s *Sink) MaxInFlight() int { return sdk.MaxConcurrentUnlimited }

// ensureIndex makes sure index exists: created when missing and create_index_if_not_exists
// is on, an error naming it otherwise.
func (s *Sink) ensureIndex(ctx context.Context, index string) error {
	s.mu.Lock()
	ok := s.ready[index]
	s.mu.Unlock()
	if ok {
		return nil
	}
	err := s.retry.Do(ctx, func(ctx context.Context, _ int) error {
		exists, err := s.cl.indexExists(ctx, index)
		if err != nil || exists {
			return err
		}
		if !s.cfg.CreateIndex {
			return sdk.Permanent(missingIndex(index, s.where))
		}
		return s.cl.createIndex(ctx, index, s.cfg.IndexMapping)
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.ready[index] = true
	s.mu.Unlock()
	return nil
}

func missingIndex(index, where string) error {
	return fmt.Errorf("elasticsearch sink: index %q does not exist at %s and plugin_config.create_index_if_not_exists is false: create it, or set create_index_if_not_exists = true", index, where)
}

// Consume indexes the batch's fresh messages in _bulk requests of at most batch_size
// documents and max_bulk_bytes, sends again the items the cluster refused for a while
// (429, 5xx), and commits the batch's last offset once every item landed. Items the
// cluster refuses for good (a mapping conflict) are returned as sdk.RejectedMessages, and
// only the offsets below the first of them are committed: the runtime marks the rest of
// the batch done once on_failure handled them, so no commit passes a message that is
// neither in the index nor handled. A cluster that stays unreachable or unavailable
// (503) past max_attempts is sdk.ErrNotConnected: waited out, never counted.
func (s *Sink) Consume(ctx context.Context, t sdk.TopicMetadata, m sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	p := m.Partition
	fresh := s.pos.Fresh(p, msgs)
	if len(fresh) == 0 {
		return nil
	}
	items := make([]item, 0, len(fresh))
	for i := range fresh {
		msg := &fresh[i]
		index := s.tmpl.render(t, p.PartitionID, msg)
		if err := s.ensureIndex(ctx, index); err != nil {
			s.pos.Rewind(p, fresh[0].Offset)
			return s.steer(err)
		}
		items = append(items, item{offset: msg.Offset,
			action: actionLine(index, s.docID(t, p.PartitionID, msg.Offset)),
			doc:    document(m.Schema, t, p.PartitionID, msg)})
	}
	refused, err := s.index(ctx, items)
	if err != nil {
		s.pos.Rewind(p, fresh[0].Offset) // the runtime's retry of the batch indexes it again
		return s.steer(err)
	}
	s.indexed.Add(uint64(len(items) - len(refused)))
	first, last := fresh[0].Offset, fresh[len(fresh)-1].Offset
	switch {
	case len(refused) == 0:
		s.commit(p, last)
		return nil
	case refused[0].offset > first:
		s.commit(p, refused[0].offset-1)
	}
	s.refused.Add(uint64(len(refused)))
	rej := &sdk.RejectedMessages{Err: refused[0].err}
	for _, r := range refused {
		rej.Offsets = append(rej.Offsets, r.offset)
	}
	return rej
}

// steer marks an error of an unreachable or unavailable cluster sdk.ErrNotConnected.
func (s *Sink) steer(err error) error {
	if errors.Is(err, errUnreachable) {
		return fmt.Errorf("%w: %w", sdk.ErrNotConnected, err)
	}
	return err
}

// commit commits last of p (indexed and acknowledged).
func (s *Sink) commit(p sdk.Partition, last uint64) {
	if err := s.pos.Durable(p, last); err != nil {
		// Indexed: whoever owns the partition now finds the documents there.
		s.log.Debug("elasticsearch sink: commit refused after the write", "partition", p.PartitionID, "offset", last, "error", err)
	}
}

func (s *Sink) docID(t sdk.TopicMetadata, part uint32, offset uint64) string {
	if s.cfg.DocumentID == idNone {
		return ""
	}
	return fmt.Sprintf("%s:%s:%d:%d", t.Stream, t.Topic, part, offset)
}

// index sends items in chunks and sends again, alone, those refused with 429 or 5xx,
// until they land or max_attempts is spent. It returns the items refused for good, in
// offset order.
func (s *Sink) index(ctx context.Context, items []item) ([]refusal, error) {
	var refused []refusal
	for len(items) > 0 {
		n, size := 0, 0
		for n < len(items) && n < s.cfg.BatchSize {
			l := len(items[n].action) + len(items[n].doc) + 2
			if n > 0 && size+l > int(s.cfg.MaxBulkBytes) {
				break
			}
			size += l
			n++
		}
		pending := items[:n]
		items = items[n:]
		err := s.retry.Do(ctx, func(ctx context.Context, _ int) error {
			res, err := s.cl.bulk(ctx, pending)
			if errors.Is(err, errTooLarge) && len(pending) == 1 {
				refused = append(refused, refusal{offset: pending[0].offset,
					err: fmt.Errorf("elasticsearch sink: offset %d: %w", pending[0].offset, err)})
				return nil
			}
			if err != nil {
				return err
			}
			var again []item
			var firstAgain result
			unavailable := true
			for i, r := range res {
				switch {
				case r.status >= 200 && r.status < 300:
				case r.status == http.StatusTooManyRequests || r.status >= 500:
					if len(again) == 0 {
						firstAgain = r
					}
					unavailable = unavailable && r.status == http.StatusServiceUnavailable
					again = append(again, pending[i])
				default:
					refused = append(refused, refusal{offset: pending[i].offset,
						err: fmt.Errorf("elasticsearch sink: offset %d: index %s: %d %s", pending[i].offset, r.index, r.status, r.reason)})
				}
			}
			if len(again) == 0 {
				return nil
			}
			pending = again
			err = fmt.Errorf("elasticsearch sink: %d of the _bulk items refused for now at %s, first: offset %d: index %s: %d %s",
				len(again), s.where, again[0].offset, firstAgain.index, firstAgain.status, firstAgain.reason)
			if unavailable {
				err = fmt.Errorf("%w (%w)", err, errUnreachable)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(refused, func(a, b refusal) int { return cmpUint(a.offset, b.offset) })
	return refused, nil
}

// Close logs the sink's counts and releases the idle connections. Every commit was made
// by Consume.
func (s *Sink) Close(context.Context) error {
	if s.cl == nil {
		return nil
	}
	s.log.Info("elasticsearch sink closed", "indexed", s.indexed.Load(), "rejected", s.refused.Load(), "retried", s.retried.Load())
	s.cl.http.CloseIdleConnections()
	s.cl = nil
	return nil
}
