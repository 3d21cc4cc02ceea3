package connect

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// holdFirstSink holds its first Consume until gate is closed; entered is closed when it starts.
type holdFirstSink struct {
	*recSink
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (s *holdFirstSink) Consume(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	first := false
	s.once.Do(func() { first = true; close(s.entered) })
	if first {
		<-s.gate
	}
	return s.recSink.Consume(ctx, topic, meta, msgs)
}

// TestStopDeliversWhatThePollStored: under after_polling the server stores an offset with
// the poll that returns it, so a batch polled before the stop and dropped at the stop would
// be lost. The sink holds batch 0 (offsets 0..9) until the soft stop has begun; batch 1 is
// queued and batch 2 polled behind it (30 polled, stored 29). The stop delivers all three.
// The at-least-once modes deliver only the batch in consume: the others are not committed
// (stored 9) and a restart redelivers them.
func TestStopDeliversWhatThePollStored(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			env.Fill("s", "t", 0, 100, nil)
			sink := &holdFirstSink{recSink: newRecSink(), entered: make(chan struct{}), gate: make(chan struct{})}
			sink.commitEach = true
			rt := env.start(testSinkConfig(mode, config.FailureStop), sink)
			<-sink.entered
			testkit.WaitFor(t, "30 polled", func() bool { return sinkOf(rt).counters.Polled.Load() == 30 })
			stopped := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				stopped <- rt.Stop(ctx)
			}()
			testkit.WaitFor(t, "stopping", func() bool { return rt.Status()[0].State == StateStopping })
			close(sink.gate)
			if err := <-stopped; err != nil {
				t.Fatal(err)
			}
			want, stored := seq(0, 9), uint64(9)
			if mode == config.CommitAfterPolling {
				want, stored = seq(0, 29), 29
			}
			if got := sink.got(0); !equalOffsets(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			env.WantStored("g", "s", "t", 0, stored)
		})
	}
}
