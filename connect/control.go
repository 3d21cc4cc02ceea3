package connect

import (
	"context"
	"errors"
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
// (config.LocalProvider implements it). nil: a restart reuses the configuration the
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
}

// OffsetChange sets a stopped sink's stored offset of one partition (SetOffsets): the
// next message it consumes there is Offset + 1.
type OffsetChange struct {
	Stream, Topic string
	Partition     uint32
	Offset        uint64
}

// Restart stops the connector (its soft stop, within its shutdown_timeout), re-reads its
// active configuration from Options.Configs and starts it again with a new id. A
// concurrent restart of the same connector waits for the first one.
func (r *Runtime) Restart(ctx context.Context, kind, key string) error {
	return errors.ErrUnsupported
}

// StopConnector stops one connector for good (until Restart): it is not restarted
// automatically.
func (r *Runtime) StopConnector(ctx context.Context, kind, key string) error {
	return errors.ErrUnsupported
}

// Pause stops a running sink's polling; it keeps its group membership and stores
// what it already consumed. The pause lasts until Resume or a restart.
func (r *Runtime) Pause(kind, key string) error { return errors.ErrUnsupported }

// Resume undoes Pause.
func (r *Runtime) Resume(kind, key string) error { return errors.ErrUnsupported }

// Offsets reports every partition of every topic of a sink: Iggy's current offset, the
// group's stored offset, the lag and, for partitions it owns, what it has not stored.
func (r *Runtime) Offsets(ctx context.Context, key string) ([]PartitionOffsets, error) {
	return nil, errors.ErrUnsupported
}

// SetOffsets writes the group's stored offsets of a stopped sink (stopped by
// StopConnector, or failed for good); ErrNotStopped otherwise.
func (r *Runtime) SetOffsets(ctx context.Context, key string, changes []OffsetChange) error {
	return errors.ErrUnsupported
}

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
func (r *Runtime) Failed() <-chan struct{} { return nil }

// Configured counts every connector configuration, disabled ones included.
func (r *Runtime) Configured() (sinks, sources int) {
	return len(r.conns.Sinks), len(r.conns.Sources)
}
