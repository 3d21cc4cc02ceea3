package connect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// A sink that keeps its positions in its target (sdk.PositionKeeper) resumes from what
// its target says, not from Iggy's stored offset. The offsets route shows both, with the
// lag from the one the sink resumes from (sdk.PositionReader), and a change of a stopped
// sink's offsets is made in the target first (sdk.PositionRewinder) or refused: storing
// an offset in Iggy that the sink would not resume from would change nothing.

// ErrRewindRefused: SetOffsets on a sink that keeps its positions in its target and
// cannot set them there; the error says the connector's reason.
var ErrRewindRefused = errors.New("connect: the sink's positions are kept in its target and cannot be set")

// RewindRefusedError is the ErrRewindRefused of one sink, with the connector's reason.
type RewindRefusedError struct{ Sink, Reason string }

func (e *RewindRefusedError) Error() string {
	return "sink " + e.Sink + " keeps its positions in its target and cannot set them there; no offset was changed: " + e.Reason
}

// Is makes the error ErrRewindRefused.
func (e *RewindRefusedError) Is(target error) bool { return target == ErrRewindRefused }

// positionsTimeout bounds the reads of a target's positions behind one offsets answer,
// and the opening of an instance for them.
const positionsTimeout = 10 * time.Second

// Where a partition of a sink that keeps its positions resumes (PartitionOffsets.ResumesFrom).
const (
	ResumesFromTarget = "target"
	ResumesFromIggy   = "iggy"
)

// targetOf returns the instance of a sink to ask about its target: the running instance,
// or, when the sink is stopped (by the operator or for good), a new one opened for the
// call, which release closes. keeps says it keeps its positions there as configured
// (sdk.PositionKeeper, KeepsPositions). The instance is nil when there is nothing to ask:
// the sink keeps no positions and (forRewind) has no sdk.RewindRefuser either. A sink
// that is neither running nor stopped (starting, waiting for a restart) is not opened:
// errBusy.
func (r *Runtime) targetOf(ctx context.Context, sl *slot, cfg *config.Sink, forRewind bool) (sink sdk.Sink, keeps bool, release func(), err error) {
	release = func() {}
	wanted := func(s sdk.Sink) (keeps, wanted bool) {
		if k, ok := s.(sdk.PositionKeeper); ok && keepsPositions(k) {
			return true, true
		}
		_, refuser := s.(sdk.RewindRefuser)
		return false, forRewind && refuser
	}
	if in := sl.cur.Load(); in != nil {
		if s, ok := in.c.(*sinkRunner); ok {
			if st, _ := s.status.get(); (st == StateRunning || st == StateDegraded) && s.sink != nil {
				if keeps, ok := wanted(s.sink); ok {
					return s.sink, keeps, release, nil
				}
				return nil, false, release, nil
			}
		}
	}
	if _, ok := cfg.Builtin(); !ok {
		return nil, false, release, nil // a native plugin keeps no positions the runtime knows of
	}
	cfg, _ = effectiveSink(r.builtins, cfg)
	factory, err := sinkFactory(r.builtins, r.loadSink, cfg, r.pluginDirs)
	if err != nil {
		return nil, false, release, nil //nolint:nilerr // it cannot run (its start says why): no target to ask
	}
	sink = factory()
	_, keeper := sink.(sdk.PositionKeeper)
	_, refuser := sink.(sdk.RewindRefuser)
	if !keeper && (!forRewind || !refuser) {
		return nil, false, release, nil
	}
	if st := sl.status(); !sl.stoppedByUser() && !st.Restart.GaveUp {
		return sink, false, release, fmt.Errorf("%w: sink %s is %s", errBusy, cfg.Key, st.State)
	}
	log := r.log.With("sink", cfg.Key, "purpose", "the positions its target holds")
	env := sdk.SinkEnv{Key: cfg.Key, Config: cfg.PluginConfig, Logger: log, OnFailure: cfg.OnFailure}
	if policyFor(cfg).sinkCommits {
		env.Committer = noCommits{}
	}
	octx, cancel := context.WithTimeout(ctx, positionsTimeout)
	defer cancel()
	if err := callSafely(func() error { return sink.Open(octx, env) }); err != nil {
		return sink, false, release, fmt.Errorf("open the sink to read its target's positions: %w", err)
	}
	release = func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		if err := callSafely(func() error { return sink.Close(cctx) }); err != nil {
			log.Warn("closing the instance opened for the target's positions failed", "error", err)
		}
	}
	keeps, ok := wanted(sink)
	if !ok {
		release()
		return nil, false, func() {}, nil
	}
	return sink, keeps, release, nil
}

// errBusy: the sink is between states; its target's positions are read while it runs or
// once it is stopped.
var errBusy = errors.New("its target's positions are read while it runs or once it is stopped")

func keepsPositions(k sdk.PositionKeeper) bool {
	var keeps bool
	return callSafely(func() error { keeps = k.KeepsPositions(); return nil }) == nil && keeps
}

// noCommits is the Committer of an instance opened only for its positions: it owns no
// partition, so every commit is refused.
type noCommits struct{}

func (noCommits) Commit(p sdk.Partition, offset uint64) error {
	return fmt.Errorf("%w: partition %d offset %d: the instance was opened to read positions only", sdk.ErrCommitUnknownPartition, p.PartitionID, offset)
}

// addTargetPositions fills the target's position of each partition of a sink that keeps
// them, and the lag from where it resumes. A target that cannot be read leaves Iggy's
// figures and says why in TargetError.
func (r *Runtime) addTargetPositions(ctx context.Context, sl *slot, cfg *config.Sink, out []PartitionOffsets) {
	ctx, cancel := context.WithTimeout(ctx, positionsTimeout)
	defer cancel()
	sink, keeps, release, err := r.targetOf(ctx, sl, cfg, false)
	defer release()
	if sink == nil || (!keeps && err == nil) {
		return
	}
	fail := func(i int, msg string) {
		out[i].KeepsPositions, out[i].TargetError = true, msg
	}
	if err != nil {
		for i := range out {
			fail(i, err.Error())
		}
		return
	}
	reader, ok := sink.(sdk.PositionReader)
	if !ok {
		for i := range out {
			fail(i, "the sink keeps its positions in its target and does not report them")
		}
		return
	}
	for _, idx := range byTopic(out) {
		first := out[idx[0]]
		meta, err := r.be.topicMetadata(ctx, first.Stream, first.Topic)
		var held map[sdk.Partition]uint64
		if err == nil {
			parts := make([]sdk.Partition, len(idx))
			for j, i := range idx {
				parts[j] = sdk.Partition{StreamID: meta.StreamID, TopicID: meta.TopicID, PartitionID: out[i].Partition}
			}
			err = callSafely(func() (err error) { held, err = reader.HeldPositions(ctx, meta, parts); return err })
		}
		for _, i := range idx {
			if err != nil {
				fail(i, fmt.Sprintf("read the target's positions: %v", err))
				continue
			}
			o := &out[i]
			o.KeepsPositions, o.Target, o.ResumesFrom = true, -1, ResumesFromIggy
			if next, ok := held[sdk.Partition{StreamID: meta.StreamID, TopicID: meta.TopicID, PartitionID: o.Partition}]; ok {
				o.Target, o.ResumesFrom = int64(next)-1, ResumesFromTarget
				o.Lag = lagOf(o.Current, o.Target)
			}
		}
	}
}

// byTopic groups the indexes of out by stream and topic, in order of first appearance.
func byTopic(out []PartitionOffsets) [][]int {
	type tk struct{ stream, topic string }
	at := map[tk]int{}
	var groups [][]int
	for i, o := range out {
		k := tk{o.Stream, o.Topic}
		g, ok := at[k]
		if !ok {
			g = len(groups)
			at[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// rewindTarget sets, for a stopped sink that keeps its positions, each changed
// partition's position in its target, before its offsets are stored in Iggy: a
// sdk.PositionRewinder does it in one step. It refuses (ErrRewindRefused) for a sink
// whose sdk.RewindRefuser gives a reason (a replay its target would drop, positions it
// cannot set), and for any other that keeps its positions. Any other sink changes
// nothing here.
func (r *Runtime) rewindTarget(ctx context.Context, sl *slot, cfg *config.Sink, changes []OffsetChange) error {
	sink, keeps, release, err := r.targetOf(ctx, sl, cfg, true)
	defer release()
	if sink == nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sink %s: %w", cfg.Key, err)
	}
	reason := ""
	if rf, ok := sink.(sdk.RewindRefuser); ok {
		_ = callSafely(func() error { reason = rf.RewindRefusal(); return nil })
	}
	rw, ok := sink.(sdk.PositionRewinder)
	switch {
	case reason != "":
	case !keeps:
		return nil
	case !ok:
		reason = "the sink keeps its positions in its target, which cannot set them: it would resume where its target says, whatever Iggy's stored offset"
	}
	if reason != "" {
		return &RewindRefusedError{Sink: cfg.Key, Reason: reason}
	}
	metas := map[[2]string]sdk.TopicMetadata{}
	pcs := make([]sdk.PositionChange, 0, len(changes))
	for _, c := range changes {
		k := [2]string{c.Stream, c.Topic}
		meta, ok := metas[k]
		if !ok {
			if meta, err = r.be.topicMetadata(ctx, c.Stream, c.Topic); err != nil {
				return fmt.Errorf("sink %s: stream %s topic %s: %w", cfg.Key, c.Stream, c.Topic, err)
			}
			metas[k] = meta
		}
		pcs = append(pcs, sdk.PositionChange{Topic: meta,
			Partition: sdk.Partition{StreamID: meta.StreamID, TopicID: meta.TopicID, PartitionID: c.Partition}, Next: c.Offset + 1})
	}
	slices.SortFunc(pcs, func(a, b sdk.PositionChange) int {
		return cmp.Or(cmp.Compare(a.Topic.Stream, b.Topic.Stream), cmp.Compare(a.Topic.Topic, b.Topic.Topic),
			cmp.Compare(a.Partition.PartitionID, b.Partition.PartitionID))
	})
	if err := callSafely(func() error { return rw.RewindPositions(ctx, pcs) }); err != nil {
		return fmt.Errorf("sink %s: set the positions its target holds: %w", cfg.Key, err)
	}
	r.log.Info("sink positions set in its target", "sink", cfg.Key, "partitions", len(pcs))
	return nil
}
