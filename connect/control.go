package connect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferryio/ferry/connect/config"
)

// Errors of the control methods (Restart, StopConnector, Pause, Resume, Offsets,
// SetOffsets); the HTTP API maps them to status codes.
var (
	// ErrNotFound: no connector of that kind and key was started by this runtime.
	ErrNotFound = errors.New("connect: connector not found")
	// ErrNotStopped: the operation needs the connector stopped (SetOffsets).
	ErrNotStopped = errors.New("connect: connector is not stopped")
	// ErrNotRunning: the operation needs the connector running (Pause, Resume).
	ErrNotRunning = errors.New("connect: connector is not running")
	// ErrNotSink: the operation exists for sinks only.
	ErrNotSink = errors.New("connect: not a sink")
)

// Kinds of connector, as Status.Kind and the control methods name them.
const (
	KindSink   = "sink"
	KindSource = "source"
)

// ConfigSource re-reads a connector's active configuration when it is restarted
// (connect/provider's Local and HTTP implement it). nil: a restart reuses the configuration the
// connector started with.
type ConfigSource interface {
	ActiveSink(key string) (*config.Sink, error)
	ActiveSource(key string) (*config.Source, error)
}

// RestartState is the supervision state of one connector (docs/architecture.md,
// "Supervision").
type RestartState struct {
	Restarts    uint32    // automatic restarts since the connector last ran healthily
	Total       uint64    // every restart of this connector, automatic and requested
	MaxRestarts uint32    // from [restart] max_restarts; 0 = never restarted automatically
	NextRetry   time.Time // when the next automatic restart is due; zero when none is
	GaveUp      bool      // failed for good: restarts exhausted (or off) after a failure
	// WaitingForPlugin: the connector is not reopened yet because a call into the stopped
	// instance's native plugin, abandoned at its stop, has not returned (the plugin hangs).
	WaitingForPlugin bool
}

// PartitionOffsets is one partition of a sink as Runtime.Offsets reports it. Offsets
// are -1 when none.
type PartitionOffsets struct {
	Stream, Topic string
	Partition     uint32
	Current       int64  // the partition's last offset, as Iggy reports it
	Stored        int64  // the group's stored offset
	Lag           uint64 // Current − Stored (Current + 1 when nothing is stored)
	Uncommitted   uint64 // polled by this sink but not stored yet
	Owned         bool   // assigned to this sink's member now
	// StoreFailures and StoreError: the partition's consecutive failed offset stores
	// and the last one's error, as in PartitionStatus (0 and nil when not failing or
	// not in this sink's tables).
	StoreFailures int
	StoreError    *LastError
	// ReadAt is when the read of Iggy these offsets come from began (it may be older
	// than a second while a new read runs: [Runtime.SinkPartitions]).
	ReadAt time.Time
	// KeepsPositions: the sink keeps its positions in its target (sdk.PositionKeeper, as
	// configured); then Target is the last offset its target holds of the partition (-1:
	// none), ResumesFrom where the sink resumes (ResumesFromTarget, or ResumesFromIggy
	// for a partition its target holds nothing of) and Lag counts from there.
	// TargetError says why the target's position is not known.
	KeepsPositions bool
	Target         int64
	ResumesFrom    string
	TargetError    string
}

// OffsetChange sets a stopped sink's stored offset of one partition (SetOffsets): the
// next message it consumes there is Offset + 1.
type OffsetChange struct {
	Stream, Topic string
	Partition     uint32
	Offset        uint64
}

// Restart stops the connector (its soft stop, bounded by ctx: then it is abandoned),
// re-reads its active configuration from Options.Configs and starts it again with a new
// id; the restart policy's count starts again. A concurrent restart of the same
// connector waits for the first one. The error is ErrNotFound, or why its config could
// not be read (the connector then stays stopped); a failed start is not an error here:
// it shows in the status and is restarted by the policy.
func (r *Runtime) Restart(ctx context.Context, kind, key string) error {
	sl, err := r.slotOf(kind, key)
	if err != nil {
		return err
	}
	return sl.do(ctx, opRestart)
}

// StopConnector stops one connector (its soft stop, bounded by ctx) until Restart: it
// is not restarted automatically.
func (r *Runtime) StopConnector(ctx context.Context, kind, key string) error {
	sl, err := r.slotOf(kind, key)
	if err != nil {
		return err
	}
	return sl.do(ctx, opStop)
}

// runningSink returns the current instance of a sink when it is running.
func (r *Runtime) runningSink(kind, key string) (*sinkRunner, error) {
	if kind != KindSink {
		return nil, ErrNotSink
	}
	sl, err := r.slotOf(kind, key)
	if err != nil {
		return nil, err
	}
	s, ok := sl.cur.Load().c.(*sinkRunner)
	if !ok {
		return nil, ErrNotSink
	}
	if st, _ := s.status.get(); st != StateRunning && st != StateDegraded {
		return nil, fmt.Errorf("%w: sink %s is %s", ErrNotRunning, key, st)
	}
	return s, nil
}

// Pause stops a running sink's polling: it keeps its group membership, delivers what it
// had polled and stores what is done. The pause lasts until Resume or a restart.
func (r *Runtime) Pause(kind, key string) error {
	s, err := r.runningSink(kind, key)
	if err != nil {
		return err
	}
	s.hold(true)
	return nil
}

// Resume undoes Pause.
func (r *Runtime) Resume(kind, key string) error {
	s, err := r.runningSink(kind, key)
	if err != nil {
		return err
	}
	s.hold(false)
	return nil
}

// sinkConfig returns a sink's current configuration.
func (r *Runtime) sinkConfig(key string) (*slot, *config.Sink, error) {
	sl, err := r.slotOf(KindSink, key)
	if err != nil {
		return nil, nil, err
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl, sl.sinkCfg, nil
}

// Offsets reports every partition of every topic of a sink, in any state: Iggy's
// current offset, the group's stored offset, the lag, for a sink that keeps its
// positions in its target the position it holds (the lag then from where the sink
// resumes: positions.go) and, for partitions it owns, what it has not stored ([Runtime.SinkPartitions]: read from Iggy at most once a second per
// topic). The error is ErrNotFound, or why a topic's offsets could not be read.
func (r *Runtime) Offsets(ctx context.Context, key string) ([]PartitionOffsets, error) {
	sl, cfg, err := r.sinkConfig(key)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, fmt.Errorf("sink %s: %w", key, errInvalidConfig)
	}
	parts, err := r.sinkPartitions(ctx, cfg, sl.status().Partitions)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", key, err)
	}
	out := make([]PartitionOffsets, 0, len(parts))
	for _, p := range parts {
		o := PartitionOffsets{Stream: p.Stream, Topic: p.Topic, Partition: p.Partition, Current: p.Current,
			Stored: p.Stored, Lag: p.Lag}
		if p.State == "owned" {
			o.Owned, o.Uncommitted = true, p.Uncommitted
		}
		o.StoreFailures, o.StoreError, o.ReadAt = p.StoreFailures, p.StoreError, p.ReadAt
		out = append(out, o)
	}
	r.addTargetPositions(ctx, sl, cfg, out)
	return out, nil
}

// SetOffsets writes the group's stored offsets of a stopped sink (stopped by
// StopConnector, or failed for good); ErrNotStopped otherwise. A sink that keeps its
// positions in its target has them set there first (sdk.PositionRewinder), or the change
// is refused with ErrRewindRefused. Each change must name a
// stream and topic of the sink. The sink consumes from Offset + 1 once restarted.
func (r *Runtime) SetOffsets(ctx context.Context, key string, changes []OffsetChange) error {
	sl, cfg, err := r.sinkConfig(key)
	if err != nil {
		return err
	}
	if cfg == nil {
		return fmt.Errorf("sink %s: %w", key, errInvalidConfig)
	}
	if st := sl.status(); !sl.stoppedByUser() && !st.Restart.GaveUp {
		return fmt.Errorf("%w: sink %s is %s (stop it first)", ErrNotStopped, key, st.State)
	}
	adm, ok := r.be.(offsetAdmin)
	if !ok {
		return errNoAdmin
	}
	type tk struct{ stream, topic string }
	groups := map[tk]string{}
	for _, st := range cfg.Streams {
		group := st.ConsumerGroup
		if group == "" {
			group = config.DefaultConsumerGroup(cfg.Key)
		}
		for _, t := range st.Topics {
			groups[tk{st.Stream, t}] = group
		}
	}
	byTopic := map[tk]map[uint32]uint64{}
	for _, c := range changes {
		k := tk{c.Stream, c.Topic}
		if _, ok := groups[k]; !ok {
			return fmt.Errorf("%w: stream %q topic %q is not consumed by sink %s", ErrInvalidOffsets, c.Stream, c.Topic, key)
		}
		if byTopic[k] == nil {
			byTopic[k] = map[uint32]uint64{}
		}
		byTopic[k][c.Partition] = c.Offset
	}
	for k, offs := range byTopic {
		// Check every change against the topic first, so a bad one changes nothing.
		parts, err := adm.groupOffsets(ctx, groups[k], k.stream, k.topic)
		if err != nil {
			return fmt.Errorf("sink %s: %w", key, err)
		}
		current := make(map[uint32]int64, len(parts))
		for _, p := range parts {
			current[p.id] = p.current
		}
		for id, off := range offs {
			cur, ok := current[id]
			switch {
			case !ok:
				return fmt.Errorf("%w: stream %q topic %q has no partition %d", ErrInvalidOffsets, k.stream, k.topic, id)
			case cur < 0 || off > uint64(cur):
				// Compared unsigned: an offset above the int64 range is past every last offset.
				return fmt.Errorf("%w: stream %q topic %q partition %d: offset %d is past the last offset %d", ErrInvalidOffsets, k.stream, k.topic, id, off, cur)
			}
		}
	}
	// The target first: the sink resumes from it, so Iggy's offsets alone would change nothing.
	if err := r.rewindTarget(ctx, sl, cfg, changes); err != nil {
		return err
	}
	for k, offs := range byTopic {
		err := adm.setGroupOffsets(ctx, groups[k], k.stream, k.topic, offs)
		r.lag.forget(lagTopic{groups[k], k.stream, k.topic}) // the next read shows the change
		if err != nil {
			return fmt.Errorf("sink %s: %w", key, err)
		}
	}
	return nil
}

// ErrInvalidOffsets: SetOffsets was given a topic the sink does not consume, a
// partition the topic does not have, or an offset past the partition's last.
var ErrInvalidOffsets = errors.New("connect: invalid offsets")

// Connector returns the status of one connector.
func (r *Runtime) Connector(kind, key string) (Status, bool) {
	for _, st := range r.Status() {
		if st.Kind == kind && st.Key == key {
			return st, true
		}
	}
	return Status{}, false
}

// Failed is closed when every enabled connector has failed for good (none runs and
// none waits for a restart); a service should then exit non-zero. Never closed for a
// runtime without enabled connectors.
func (r *Runtime) Failed() <-chan struct{} { return r.failed }

// Configured counts every connector configuration, disabled ones included.
func (r *Runtime) Configured() (sinks, sources int) {
	r.mu.Lock() // Reload replaces conns
	defer r.mu.Unlock()
	sinks, sources = len(r.conns.Sinks), len(r.conns.Sources)
	for _, inv := range r.conns.Invalid { // configured too, though their files did not load
		if inv.Type == config.TypeSink {
			sinks++
		} else {
			sources++
		}
	}
	return sinks, sources
}
