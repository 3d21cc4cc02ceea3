package connect

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// State is a connector's lifecycle state, named as in Iggy's runtime API, plus Ferry's
// StateDegraded.
type State string

// Connector states.
const (
	StateStarting State = "starting"
	StateRunning  State = "running"
	StateStopping State = "stopping"
	StateStopped  State = "stopped"
	StateError    State = "error"
	// StateDegraded is a running sink that cannot poll one of its topics (for example the
	// topic was deleted): it keeps retrying, LastError says why, and it is running again
	// as soon as a poll of that topic works (a batch, or an assignment of the topic). Not
	// one of Iggy's states.
	StateDegraded State = "degraded"
)

// Counters are a connector's running totals for the life of the Runtime: every instance
// of the connector (a restart starts a new one) counts into the same Counters, so they
// never go backwards. Every field is updated atomically; read them through
// [Counters.Snapshot]. Failures are never counted as delivered, and each failure is
// counted once.
type Counters struct {
	Polled        atomic.Uint64 // messages received from Iggy
	Delivered     atomic.Uint64 // messages of batches the sink accepted (Consume returned nil)
	Committed     atomic.Uint64 // messages whose offsets were stored in Iggy by the runtime
	ConsumeErrors atomic.Uint64 // failed Consume calls (errors and panics), retries included
	FailedBatches atomic.Uint64 // batches whose retries ran out
	DeadLettered  atomic.Uint64 // messages sent to the dead-letter topic
	Skipped       atomic.Uint64 // messages skipped by on_failure = "skip"
	Stores        atomic.Uint64 // offset stores written to Iggy (each may cover many messages)
	StoreErrors   atomic.Uint64 // failed offset stores (each is retried)
	StoresRefused atomic.Uint64 // stores refused for good (partition not owned any more); final for that partition
	PollErrors    atomic.Uint64 // failed polls (each is retried; the sink is degraded meanwhile)
	Revoked       atomic.Uint64 // partitions revoked from this sink (each then drains, or is released at once)
	// TopicsRecreated counts the times a topic of this sink was found deleted and
	// created again (its partitions then start afresh on the new topic).
	TopicsRecreated atomic.Uint64
	// PartitionRewinds counts the times a partition of this sink was found gone back to
	// an earlier offset (purged: it then starts afresh at offset 0).
	PartitionRewinds atomic.Uint64
	HeaderErrors     atomic.Uint64 // messages whose user headers could not be decoded (delivered without headers)
	StartErrors      atomic.Uint64 // starts that failed (open, plugin not found, missing stream or topic, ...)
	// Payloads (payload.go): decoded by the stream's schema (raw streams are not decoded),
	// failed decode, failed a transform, dropped by a transform. A message that failed is
	// poison: on_failure handles it alone (DeadLettered, Skipped, or the sink stops).
	Decoded, DecodeErrors, TransformErrors, Filtered atomic.Uint64
	// StoreLatency is the time from a sink's commit (or the runtime's resolution) of an
	// offset to its store in Iggy.
	StoreLatency latencyHistogram
	// Per-batch stage durations (Iggy's stage histogram): prepare (messages converted for
	// the sink), ffi (the sink's Consume, retries included) and the whole batch.
	PrepareTime, ConsumeTime, BatchTime stageHistogram
	Retries                             atomic.Uint64 // Consume attempts after the first

	CommitsAccepted         atomic.Uint64
	CommitsStale            atomic.Uint64
	CommitsOutOfRange       atomic.Uint64
	CommitsUnknownPartition atomic.Uint64
}

// Stats is a snapshot of [Counters].
type Stats struct {
	Polled, Delivered, Committed                        uint64
	ConsumeErrors, FailedBatches, DeadLettered, Skipped uint64
	Stores, StoreErrors, StoresRefused, HeaderErrors    uint64
	PollErrors                                          uint64
	Revoked                                             uint64
	TopicsRecreated                                     uint64
	PartitionRewinds                                    uint64
	StartErrors                                         uint64 // failed starts of the connector
	CommitsAccepted                                     uint64
	CommitsStale, CommitsOutOfRange, CommitsUnknown     uint64
	StoreLatency                                        Histogram

	// Filtered counts messages a transform dropped (no built-in transform drops one);
	// Decoded, DecodeErrors and TransformErrors as in [Counters].
	Filtered, Decoded, DecodeErrors, TransformErrors uint64
	// Retries counts retried attempts: Consume calls (sinks), sends and state saves
	// (sources).
	Retries uint64
	// Stages holds the duration of each stage of a batch, by Iggy's stage names
	// (StageDecode, StagePrepare, StageFFI, StageIggySend, StageStateSave, StageTotal),
	// in StageBounds' buckets; only the stages of its kind are present.
	Stages map[string]Histogram

	// Sources (source.go): messages read from the source, messages Iggy confirmed, failed
	// send attempts. For a source, Committed counts messages of batches whose state was
	// saved and acked, StoreErrors failed state saves and FailedBatches batches refused
	// before sending.
	Produced, Sent, SendErrors uint64
}

// Stage names, as Iggy's runtime labels iggy_connector_stage_duration_seconds.
const (
	StageDecode    = "decode"     // sink: payloads decoded by the stream schema
	StagePrepare   = "prepare"    // sink: messages converted for the plugin
	StageFFI       = "ffi"        // sink: the plugin's Consume
	StageIggySend  = "iggy_send"  // source: the batch sent to Iggy
	StageStateSave = "state_save" // source: the state file written
	StageTotal     = "total"      // the whole batch
)

// StageBounds are the buckets of the stage histograms, Iggy's (0.00005 s to 5 s).
var StageBounds = []time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 5 * time.Second,
}

// Errors is what Iggy's runtime counts as a connector's errors: failed Consume calls,
// failed polls, sends, state saves and stores, rejected batches, payloads that failed
// decode or a transform; and failed starts (a connector whose plugin is missing is in
// error, and its errors counter says so).
func (s Stats) Errors() uint64 {
	return s.ConsumeErrors + s.PollErrors + s.SendErrors + s.StoreErrors + s.FailedBatches + s.DecodeErrors + s.TransformErrors + s.StartErrors
}

// CommitsRejected is the sum of rejected commits of every kind.
func (s Stats) CommitsRejected() uint64 {
	return s.CommitsStale + s.CommitsOutOfRange + s.CommitsUnknown
}

// Snapshot reads every counter.
func (c *Counters) Snapshot() Stats {
	return Stats{
		Polled: c.Polled.Load(), Delivered: c.Delivered.Load(), Committed: c.Committed.Load(),
		ConsumeErrors: c.ConsumeErrors.Load(), FailedBatches: c.FailedBatches.Load(),
		DeadLettered: c.DeadLettered.Load(), Skipped: c.Skipped.Load(),
		Stores: c.Stores.Load(), StoreErrors: c.StoreErrors.Load(), StoresRefused: c.StoresRefused.Load(), PollErrors: c.PollErrors.Load(), HeaderErrors: c.HeaderErrors.Load(), Revoked: c.Revoked.Load(), TopicsRecreated: c.TopicsRecreated.Load(), PartitionRewinds: c.PartitionRewinds.Load(), StartErrors: c.StartErrors.Load(),
		Filtered: c.Filtered.Load(), Decoded: c.Decoded.Load(), DecodeErrors: c.DecodeErrors.Load(), TransformErrors: c.TransformErrors.Load(),
		CommitsAccepted: c.CommitsAccepted.Load(), CommitsStale: c.CommitsStale.Load(),
		CommitsOutOfRange: c.CommitsOutOfRange.Load(), CommitsUnknown: c.CommitsUnknownPartition.Load(),
		StoreLatency: c.StoreLatency.snapshot(), Retries: c.Retries.Load(),
		Stages: map[string]Histogram{StagePrepare: c.PrepareTime.snapshot(), StageFFI: c.ConsumeTime.snapshot(),
			StageTotal: c.BatchTime.snapshot()},
	}
}

// latencyBounds are the upper bounds of a latencyHistogram's buckets; a last bucket
// counts everything above the highest.
var latencyBounds = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
}

// latencyHistogram counts durations in latencyBounds' buckets; safe for concurrent use.
type latencyHistogram struct{ histCounts }

func (h *latencyHistogram) observe(d time.Duration) { h.histCounts.observe(latencyBounds, d) }
func (h *latencyHistogram) snapshot() Histogram     { return h.histCounts.snapshot(latencyBounds) }

// stageHistogram counts batch stage durations in StageBounds' buckets.
type stageHistogram struct{ histCounts }

func (h *stageHistogram) observe(d time.Duration) { h.histCounts.observe(StageBounds, d) }
func (h *stageHistogram) snapshot() Histogram     { return h.histCounts.snapshot(StageBounds) }

// since observes the time elapsed since start and returns now, for the next stage.
func (h *stageHistogram) since(start time.Time) time.Time {
	now := time.Now()
	h.observe(now.Sub(start))
	return now
}

// histCounts are the buckets of a histogram with 13 bounds (both kinds have 13).
type histCounts struct {
	counts [14]atomic.Uint64 // len(bounds) + 1
	sum    atomic.Int64      // nanoseconds
}

func (h *histCounts) observe(bounds []time.Duration, d time.Duration) {
	i := len(bounds)
	for j, b := range bounds {
		if d <= b {
			i = j
			break
		}
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

func (h *histCounts) snapshot(bounds []time.Duration) Histogram {
	out := Histogram{Bounds: bounds, Counts: make([]uint64, len(h.counts)), Sum: time.Duration(h.sum.Load())}
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
		out.Count += out.Counts[i]
	}
	return out
}

// Histogram is a snapshot of a latency histogram: Counts[i] observations were at most
// Bounds[i] (and above Bounds[i-1]); the last count is everything above the highest
// bound.
type Histogram struct {
	Bounds []time.Duration
	Counts []uint64
	Count  uint64
	Sum    time.Duration
}

func (c *Counters) reject(err error) {
	switch {
	case errors.Is(err, sdk.ErrCommitUnknownPartition):
		c.CommitsUnknownPartition.Add(1)
	case errors.Is(err, sdk.ErrCommitStale):
		c.CommitsStale.Add(1)
	case errors.Is(err, sdk.ErrCommitOutOfRange):
		c.CommitsOutOfRange.Add(1)
	}
}

// LastError is a connector's most recent error, as Iggy's API reports it.
type LastError struct {
	Message   string
	Timestamp time.Time
}

// Status is one connector's state as [Runtime.Status] reports it.
type Status struct {
	Key       string
	Kind      string // "sink" or "source"
	Name      string
	State     State
	LastError *LastError // nil unless the last transition recorded an error
	Stats     Stats
	// Gauges are the connector's own figures (sdk.Gauger), nil when it has none.
	Gauges []sdk.Gauge
	// Partitions lists a sink's partitions in its tables (owned and draining), by
	// stream, topic and partition; nil for a source.
	Partitions []PartitionStatus

	ID            uint32 // the current instance's plugin id (new at every restart)
	Enabled       bool
	Version       uint64 // the config version it runs
	Path          string // the plugin path as resolved ("builtin:NAME" for built-ins)
	PluginVersion string // the plugin's own version, or "unknown"
	Paused        bool   // a sink paused by Pause
	Restart       RestartState
	// Sink or Source is the configuration the instance runs (one of them is nil).
	Sink   *config.Sink
	Source *config.Source
}

// statusCell holds a connector's state; safe for concurrent use.
type statusCell struct {
	mu      sync.Mutex
	state   State
	lastErr *LastError
	// failing names what made a running connector degraded (a sink's topics that cannot
	// be polled); it is running again once the set is empty.
	failing map[string]bool
}

func (s *statusCell) set(st State) {
	s.mu.Lock()
	s.state = st
	if st == StateRunning || st == StateStopped {
		s.lastErr = nil
		clear(s.failing)
	}
	s.mu.Unlock()
}

// started moves a starting connector to running and reports whether it did: a failure
// recorded while it started (a sink's batch may fail for good before its start returns)
// stays.
func (s *statusCell) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StateStarting {
		return false
	}
	s.state, s.lastErr = StateRunning, nil
	clear(s.failing)
	return true
}

// degrade records that who (a sink's stream/topic) cannot do its work because of err: a
// running connector becomes degraded with err as its last error. No effect in any other
// state (an error, a stop in progress, stay what they are).
func (s *statusCell) degrade(who string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StateRunning && s.state != StateDegraded {
		return
	}
	if s.failing == nil {
		s.failing = map[string]bool{}
	}
	s.failing[who] = true
	s.state = StateDegraded
	s.lastErr = &LastError{Message: err.Error(), Timestamp: time.Now()}
}

// recovered records that who works again: a degraded connector is running again (its
// last error cleared) once nothing else keeps it degraded.
func (s *statusCell) recovered(who string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.failing[who] {
		return
	}
	delete(s.failing, who)
	if s.state == StateDegraded && len(s.failing) == 0 {
		s.state = StateRunning
		s.lastErr = nil
	}
}

// working records that a connector in error does its work again (a source's batch was
// sent and acknowledged after failed reads or sends): it is running, its last error
// cleared. Any other state stays what it is.
func (s *statusCell) working() {
	s.mu.Lock()
	if s.state == StateError {
		s.state, s.lastErr = StateRunning, nil
	}
	s.mu.Unlock()
}

func (s *statusCell) fail(err error) {
	s.mu.Lock()
	s.state = StateError
	s.lastErr = &LastError{Message: err.Error(), Timestamp: time.Now()}
	s.mu.Unlock()
}

// stopped moves to stopped unless the connector is in error (an error stays visible).
func (s *statusCell) stopped() {
	s.mu.Lock()
	if s.state != StateError {
		s.state = StateStopped
		s.lastErr = nil
	}
	s.mu.Unlock()
}

func (s *statusCell) get() (State, *LastError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var le *LastError
	if s.lastErr != nil {
		c := *s.lastErr
		le = &c
	}
	return s.state, le
}
