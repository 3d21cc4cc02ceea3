package connect

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/server/servertest"
)

// iggyEnv is one real embedded server (real TCP on loopback) and an admin client
// (iggykit), with the runtime helpers of this package's tests. Every Runtime a test starts
// gets its own client, as separate processes would.
type iggyEnv struct{ *iggykit.Env }

// newIggyEnv starts a server with opts; it and every client dialled through the env are
// closed by t.Cleanup (clients first).
func newIggyEnv(t testing.TB, opts ...servertest.Option) *iggyEnv {
	t.Helper()
	return &iggyEnv{iggykit.Start(t, opts...)}
}

func bg(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newRuntime builds a Runtime over its own client with sinks registered as built-ins
// ("builtin:KEY" of each config resolves to the given instance).
func (e *iggyEnv) runtime(cfgs []*config.Sink, sinks map[string]sdk.Sink) *Runtime {
	e.T.Helper()
	reg := sdk.NewRegistry()
	for name, s := range sinks {
		reg.AddSink(name, func() sdk.Sink { return s })
	}
	for _, c := range cfgs {
		fitInFlight(c, sinks[strings.TrimPrefix(c.Path, "builtin:")])
		if err := c.Validate(); err != nil {
			e.T.Fatal(err)
		}
	}
	rt, err := New(Options{Connectors: &config.Connectors{Sinks: cfgs}, Client: e.Dial(), Builtins: reg, Logger: quietLog})
	if err != nil {
		e.T.Fatal(err)
	}
	return rt
}

// fitInFlight keeps FERRY_TEST_MAX_IN_FLIGHT to the sinks that accept concurrent calls;
// the others would be refused, as they should (TestMaxInFlightRefusedWithoutCapability).
func fitInFlight(c *config.Sink, sink sdk.Sink) {
	if _, ok := sink.(sdk.ConcurrentSink); !ok && c.MaxInFlight == testMaxInFlight() {
		c.MaxInFlight = 1
	}
}

// start builds and starts a Runtime running one sink (its config's builtin name is "rec").
func (e *iggyEnv) start(cfg *config.Sink, sink sdk.Sink) *Runtime {
	e.T.Helper()
	rt := e.runtime([]*config.Sink{cfg}, map[string]sdk.Sink{"rec": sink})
	if err := rt.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	return rt
}

func stopRuntime(t testing.TB, rt *Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// sinkOf returns the runtime's first sink runner (tests inspect its trackers).
func sinkOf(rt *Runtime) *sinkRunner {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, sl := range rt.slots {
		if s, ok := sl.cur.Load().c.(*sinkRunner); ok {
			return s
		}
	}
	return nil
}

// ownedPartitions lists the partitions the runtime's first sink currently owns (in its
// tables and not draining).
func ownedPartitions(rt *Runtime) map[uint32]bool {
	out := map[uint32]bool{}
	for p, st := range tablePartitions(rt) {
		if st == partOwned {
			out[p] = true
		}
	}
	return out
}

// tablePartitions returns every partition in the runtime's first sink's tables, with its
// state (owned or draining).
func tablePartitions(rt *Runtime) map[uint32]partState {
	out := map[uint32]partState{}
	s := sinkOf(rt)
	if s == nil {
		return out
	}
	for _, tc := range s.topics {
		tc.table.mu.Lock()
		for id, p := range tc.table.parts {
			out[id] = p.state
		}
		tc.table.mu.Unlock()
	}
	return out
}

// faultyBackend wraps the real backend: the next failStores offset stores of its
// consumers fail before reaching the server, and so does every store for which fail
// (when set) returns an error (fault hooks on a real connection).
type faultyBackend struct {
	backend
	failStores atomic.Int32
	fail       func(partition uint32, offset uint64) error
	stores     atomic.Int64 // stores that reached the real consumer
}

func (f *faultyBackend) newConsumer(ctx context.Context, cfg consumerConfig) (memberConsumer, error) {
	c, err := f.backend.newConsumer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &faultyConsumer{memberConsumer: c, f: f}, nil
}

type faultyConsumer struct {
	memberConsumer
	f *faultyBackend
}

var errInjectedStore = fmt.Errorf("injected offset store failure")

func (c *faultyConsumer) Store(ctx context.Context, life uint64, p uint32, off uint64) error {
	if c.f.failStores.Add(-1) >= 0 {
		return errInjectedStore
	}
	if c.f.fail != nil {
		if err := c.f.fail(p, off); err != nil {
			return err
		}
	}
	c.f.stores.Add(1)
	return c.memberConsumer.Store(ctx, life, p, off)
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for o := from; o <= to; o++ {
		out = append(out, o)
	}
	return out
}

func equalOffsets(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var allModes = []config.CommitMode{config.CommitAfterPolling, config.CommitAfterConsuming, config.CommitSinkControlled}
