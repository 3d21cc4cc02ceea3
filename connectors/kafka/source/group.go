package source

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ferryio/ferry/connectors/kafka/internal/kclient"
	"github.com/ferryio/ferry/sdk"
)

// The group's rebalances, handled in band: franz-go calls these on its group goroutine
// while no poll holds records it has not handed over (BlockRebalanceOnPoll), before it
// fetches the assigned partitions' offsets and after which it returns no record of the
// revoked ones.

// assigned reads back what Iggy holds of the assigned partitions and commits, for each one
// whose records Iggy holds past the group's committed offset, the offset after the newest
// of them: franz-go then fetches from there. Anything that fails stops the source (the
// next Read): resuming without the read-back could send twice.
func (s *Source) assigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	if s.dead.Load() {
		return
	}
	if len(assigned) == 0 {
		return
	}
	if err := s.resume(ctx, assigned); err != nil {
		s.mu.Lock()
		if s.fatal == nil {
			s.fatal = fmt.Errorf("kafka source: partitions assigned %v: %w", assigned, err)
		}
		s.notify()
		s.mu.Unlock()
		s.log.Error("kafka source: the assignment could not be read back; the source stops", "partitions", fmt.Sprint(assigned), "err", err)
		return
	}
	s.mu.Lock()
	for t, ps := range assigned {
		for _, p := range ps {
			at := tp{t, p}
			s.owned[at] = true
			delete(s.acked, at)
		}
	}
	s.mu.Unlock()
	s.log.Info("kafka source: partitions assigned", "partitions", fmt.Sprint(assigned))
}

// resume is assigned's work, retried with a short backoff while the cluster or Iggy is away.
func (s *Source) resume(ctx context.Context, assigned map[string][]int32) error {
	retry := sdk.Retry{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Attempts: 8, Jitter: 0.2,
		What: "read back the assigned partitions", Log: s.log, Transient: func(err error) bool { return !kclient.Fatal(err) }}
	return retry.Do(ctx, func(ctx context.Context, _ int) error {
		held, err := s.readBack(ctx, assigned)
		if err != nil || len(held) == 0 {
			return err
		}
		return s.commitAhead(ctx, held)
	})
}

// readBack returns, per assigned partition, the next offset after the newest record Iggy
// holds of it (none: Iggy holds none in the window read).
func (s *Source) readBack(ctx context.Context, assigned map[string][]int32) (map[tp]int64, error) {
	if s.cfg.Partitioning == PartitionBalanced || s.env.Tail == nil {
		return nil, nil // at least once: records of a partition spread over Iggy's partitions
	}
	parse := func(m sdk.SentMessage) (sdk.Origin[int64], bool) {
		t, ok1 := sdk.Lookup(m.Headers, HeaderTopic)
		p, ok2 := sdk.Lookup(m.Headers, HeaderPartition)
		o, ok3 := sdk.Lookup(m.Headers, HeaderOffset)
		if !ok1 || !ok2 || !ok3 {
			return sdk.Origin[int64]{}, false
		}
		pn, err1 := p.AsUint64()
		on, err2 := o.AsUint64()
		if err1 != nil || err2 != nil {
			return sdk.Origin[int64]{}, false
		}
		return sdk.Origin[int64]{Lane: tp{string(t.Value), int32(pn)}.lane(), Pos: int64(on)}, true
	}
	less := func(a, b int64) bool { return a < b }
	// One message per Iggy partition is enough when each holds one Kafka partition: one
	// topic with no more partitions than Iggy's topic. Otherwise the partitions share, and
	// the window covers every batch a crash can leave unacknowledged or uncommitted.
	origins, err := sdk.ReadBack(ctx, s.env, 1, parse, less)
	if err != nil {
		return nil, err
	}
	lanes := 0
	for _, ps := range assigned {
		lanes += len(ps)
	}
	if shared, err := s.shared(ctx, assigned); err != nil {
		return nil, err
	} else if shared || s.cfg.Partitioning == PartitionKey {
		window := s.cfg.BatchSize * (s.cfg.MaxUnacked + maxUncommitted + 1)
		if origins, err = sdk.ReadBack(ctx, s.env, window, parse, less); err != nil {
			return nil, err
		}
	}
	held := map[tp]int64{}
	for t, ps := range assigned {
		for _, p := range ps {
			if pos, ok := origins.Newest(tp{t, p}.lane()); ok {
				held[tp{t, p}] = pos + 1
			}
		}
	}
	return held, nil
}

// shared reports whether Iggy partitions may hold records of more than one Kafka
// partition: a pattern or several topics, or a topic with more partitions than Iggy's.
func (s *Source) shared(ctx context.Context, assigned map[string][]int32) (bool, error) {
	if s.cfg.Pattern != "" || len(s.cfg.Topics) > 1 {
		return true, nil
	}
	tail, err := s.env.Tail(ctx)
	if err != nil {
		return false, fmt.Errorf("read back the topic's last messages: %w", err)
	}
	topics := make([]string, 0, len(assigned))
	for t := range assigned {
		topics = append(topics, t)
	}
	md, err := s.adm.Metadata(ctx, topics...)
	if err != nil {
		return false, fmt.Errorf("read the metadata of %v: %w", topics, err)
	}
	for _, t := range md.Topics {
		if len(t.Partitions) > len(tail.Last) {
			return true, nil
		}
	}
	return false, nil
}

// commitAhead commits held[p] for each partition whose committed offset is below it,
// after checking that the partition has records there (an Iggy topic written from another
// cluster, or a Kafka topic recreated, would otherwise make the source skip records).
func (s *Source) commitAhead(ctx context.Context, held map[tp]int64) error {
	topics := map[string]bool{}
	for at := range held {
		topics[at.topic] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	committed, err := s.adm.FetchOffsets(ctx, s.cfg.Group)
	if err != nil {
		return fmt.Errorf("fetch the committed offsets of group %q: %w", s.cfg.Group, err)
	}
	ends, err := s.adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return fmt.Errorf("list the end offsets of %v: %w", names, err)
	}
	ahead := map[string]map[int32]kgo.EpochOffset{}
	for at, next := range held {
		end, ok := ends.Lookup(at.topic, at.partition)
		if !ok || end.Err != nil {
			return fmt.Errorf("end offset of %s: %w", at.lane(), end.Err)
		}
		if next > end.Offset {
			return sdk.Permanent(fmt.Errorf("the Iggy topic holds record %d of %s, past the partition's end %d: it was written from another Kafka cluster, or the Kafka topic was recreated; use a new Iggy topic or consumer_group",
				next-1, at.lane(), end.Offset))
		}
		if c, ok := committed.Lookup(at.topic, at.partition); ok && c.Err == nil && c.At >= next {
			continue
		}
		if ahead[at.topic] == nil {
			ahead[at.topic] = map[int32]kgo.EpochOffset{}
		}
		ahead[at.topic][at.partition] = kgo.EpochOffset{Epoch: -1, Offset: next}
		s.log.Info("kafka source: Iggy holds records past the group's committed offset; committing after them",
			"partition", at.lane(), "next", next)
	}
	if len(ahead) == 0 {
		return nil
	}
	if err := commitSync(ctx, s.cl, ahead); err != nil {
		return err
	}
	s.mu.Lock()
	for t, ps := range ahead {
		for p, eo := range ps {
			s.committed[tp{t, p}] = eo.Offset
		}
	}
	s.mu.Unlock()
	return nil
}

// commitSync commits offsets and returns the first error of the answer.
func commitSync(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset) error {
	var rerr error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			rerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := errorOf(p.ErrorCode); err != nil && rerr == nil {
					rerr = fmt.Errorf("commit %s/%d: %w", t.Topic, p.Partition, err)
				}
			}
		}
	})
	return rerr
}

// revoked waits (revoke_timeout at most) for Iggy to acknowledge the batches holding
// records of the revoked partitions, commits what it acknowledged and lets the partitions
// go. A batch still unacknowledged then is logged: its records may reach Iggy after the
// next owner read back, the one case exactly once is not kept.
func (s *Source) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if s.dead.Load() {
		return
	}
	if len(revoked) == 0 {
		return
	}
	gone := map[tp]bool{}
	for t, ps := range revoked {
		for _, p := range ps {
			gone[tp{t, p}] = true
		}
	}
	deadline := time.NewTimer(s.cfg.RevokeTimeout)
	defer deadline.Stop()
	for waiting := true; waiting; {
		s.mu.Lock()
		busy := false
		for _, q := range s.inflight {
			for at := range q.next {
				if gone[at] {
					busy = true
				}
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if !busy {
			break
		}
		select {
		case <-ch:
		case <-deadline.C:
			s.log.Warn("kafka source: revoked partitions still have batches Iggy has not acknowledged; "+
				"they are not committed, and may reach Iggy after the next owner read back (a duplicate)",
				"partitions", fmt.Sprint(revoked), "revoke_timeout", s.cfg.RevokeTimeout)
			waiting = false
		case <-ctx.Done():
			waiting = false
		}
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, s.cfg.RevokeTimeout)
	defer cancel()
	if err := s.commitAckedLocked(cctx, gone); err != nil {
		s.log.Warn("kafka source: commit of revoked partitions failed; the next owner reads back what Iggy holds", "err", err)
	}
	s.drop(gone)
	s.log.Info("kafka source: partitions revoked", "partitions", fmt.Sprint(revoked))
}

// lost drops partitions the group took away without a revoke (a session that expired):
// commits would be refused; the next owner reads back what Iggy holds.
func (s *Source) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	if s.dead.Load() {
		return
	}
	gone := map[tp]bool{}
	for t, ps := range lost {
		for _, p := range ps {
			gone[tp{t, p}] = true
		}
	}
	s.commitMu.Lock()
	s.drop(gone)
	s.commitMu.Unlock()
	if len(lost) > 0 {
		s.log.Warn("kafka source: partitions lost", "partitions", fmt.Sprint(lost))
	}
}

func (s *Source) drop(gone map[tp]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for at := range gone {
		delete(s.owned, at)
		delete(s.acked, at)
		delete(s.committed, at)
	}
}

// commitLoop commits what Iggy acknowledged, coalesced: one commit at a time, of
// everything acknowledged when it starts; a failed commit is retried with backoff.
func (s *Source) commitLoop() {
	defer close(s.committer)
	retry := sdk.Retry{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2, What: "commit offsets to Kafka", Log: s.log}
	for {
		select {
		case <-s.life.Done():
			return
		case <-s.kick:
		}
		_ = retry.Do(s.life, func(ctx context.Context, _ int) error { return s.commitAcked(ctx, nil) })
	}
}

// commitAcked commits the acknowledged offsets of owned partitions (only those of only
// when not nil) that are not committed yet. commitMu serializes it with revoked and lost,
// so a partition is never committed after it was let go (the next owner would start
// below a late commit's offset); mu is not held across the request.
func (s *Source) commitAcked(ctx context.Context, only map[tp]bool) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	return s.commitAckedLocked(ctx, only)
}

func (s *Source) commitAckedLocked(ctx context.Context, only map[tp]bool) error {
	s.mu.Lock()
	due := map[string]map[int32]kgo.EpochOffset{}
	ackedN := s.ackedN
	for at, next := range s.acked {
		if !s.owned[at] || (only != nil && !only[at]) || next <= s.committed[at] {
			continue
		}
		if due[at.topic] == nil {
			due[at.topic] = map[int32]kgo.EpochOffset{}
		}
		due[at.topic][at.partition] = kgo.EpochOffset{Epoch: -1, Offset: next}
	}
	s.mu.Unlock()
	if len(due) > 0 {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := commitSync(cctx, s.cl, due)
		cancel()
		if err != nil {
			return kclient.Classify(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range due {
		for p, eo := range ps {
			if at := (tp{t, p}); eo.Offset > s.committed[at] {
				s.committed[at] = eo.Offset
			}
		}
	}
	if only == nil {
		s.doneN = max(s.doneN, ackedN)
	}
	s.notify()
	return nil
}

func errorOf(code int16) error { return kerr.ErrorForCode(code) }
