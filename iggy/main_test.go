package iggy_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// quietLogger drops the client's logs unless IGGY_TEST_LOG is set.
func quietLogger() *slog.Logger {
	if os.Getenv("IGGY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// dial connects to s and closes the client at the end of the test.
func dial(t testing.TB, s *server.Server, opts ...iggy.Opt) *iggy.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts = append([]iggy.Opt{iggy.WithLogger(quietLogger())}, opts...)
	c, err := iggy.Dial(ctx, s.Addr(), opts...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// setup creates stream "s" and topic "t" with n partitions.
func setup(t testing.TB, c *iggy.Client, n uint32) {
	t.Helper()
	ctx := testCtx(t)
	if _, err := c.CreateStream(ctx, "s"); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := c.CreateTopic(ctx, iggy.Name("s"), "t", n); err != nil {
		t.Fatalf("create topic: %v", err)
	}
}

// payloads returns n messages "prefix-0".. "prefix-(n-1)".
func payloads(prefix string, n int) []iggy.Message {
	out := make([]iggy.Message, n)
	for i := range out {
		out[i] = iggy.Message{Payload: fmt.Appendf(nil, "%s-%d", prefix, i)}
	}
	return out
}

// offsetsOf returns the offsets of msgs.
func offsetsOf(msgs []wire.Message) []uint64 {
	out := make([]uint64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Offset
	}
	return out
}

var (
	sID = iggy.Name("s")
	tID = iggy.Name("t")
)

func single(name string) wire.Consumer {
	return wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.Name(name)}
}

func u32(v uint32) *uint32 { return &v }

var _ = servertest.Start
