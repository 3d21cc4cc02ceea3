package connect

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// State is a connector's lifecycle state, named as in Iggy's runtime API.
type State string

// Connector states.
const (
	StateStarting State = "starting"
	StateRunning  State = "running"
	StateStopping State = "stopping"
	StateStopped  State = "stopped"
	StateError    State = "error"
)

// Counters are a connector's running totals. Every field is updated atomically; read them
// through [Counters.Snapshot]. Failures are never counted as delivered, and each failure is
// counted once.
type Counters struct {
	Polled        atomic.Uint64 // messages received from Iggy
	Delivered     atomic.Uint64 // messages of batches the sink accepted (Consume returned nil)
	Committed     atomic.Uint64 // messages whose offsets were stored in Iggy by the runtime
	ConsumeErrors atomic.Uint64 // failed Consume calls (errors and panics), retries included
	FailedBatches atomic.Uint64 // batches whose retries ran out
	DeadLettered  atomic.Uint64 // messages sent to the dead-letter topic
	Skipped       atomic.Uint64 // messages skipped by on_failure = "skip"
	StoreErrors   atomic.Uint64 // failed offset stores (each is retried)
	HeaderErrors  atomic.Uint64 // messages whose user headers could not be decoded (delivered without headers)

	CommitsAccepted         atomic.Uint64
	CommitsStale            atomic.Uint64
	CommitsOutOfRange       atomic.Uint64
	CommitsUnknownPartition atomic.Uint64
}

// Stats is a snapshot of [Counters].
type Stats struct {
	Polled, Delivered, Committed                        uint64
	ConsumeErrors, FailedBatches, DeadLettered, Skipped uint64
	StoreErrors, HeaderErrors                           uint64
	CommitsAccepted                                     uint64
	CommitsStale, CommitsOutOfRange, CommitsUnknown     uint64

	// Sources (source.go): messages read from the source, messages Iggy confirmed, failed
	// send attempts. For a source, Committed counts messages of batches whose state was
	// saved and acked, StoreErrors failed state saves and FailedBatches batches refused
	// before sending.
	Produced, Sent, SendErrors uint64
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
		StoreErrors: c.StoreErrors.Load(), HeaderErrors: c.HeaderErrors.Load(),
		CommitsAccepted: c.CommitsAccepted.Load(), CommitsStale: c.CommitsStale.Load(),
		CommitsOutOfRange: c.CommitsOutOfRange.Load(), CommitsUnknown: c.CommitsUnknownPartition.Load(),
	}
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
}

// statusCell holds a connector's state; safe for concurrent use.
type statusCell struct {
	mu      sync.Mutex
	state   State
	lastErr *LastError
}

func (s *statusCell) set(st State) {
	s.mu.Lock()
	s.state = st
	if st == StateRunning || st == StateStopped {
		s.lastErr = nil
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
