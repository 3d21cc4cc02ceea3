package server_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/servertest"
)

// TestReplyDelay checks the Config.ReplyDelay test hook: it sees every request's
// command code; a GetStreams held for 200 ms is answered no sooner; requests of other
// commands are not held (they would time out behind the hour every Ping is held for);
// and Close returns promptly while a Ping is being held for an hour, dropping it
// unanswered.
func TestReplyDelay(t *testing.T) {
	const delay = 200 * time.Millisecond
	var (
		mu   sync.Mutex
		seen []wire.Code
	)
	pingHeld := make(chan struct{}, 1)
	s := servertest.Start(t, servertest.WithReplyDelay(func(code wire.Code) time.Duration {
		mu.Lock()
		seen = append(seen, code)
		mu.Unlock()
		switch code {
		case wire.CodeGetStreams:
			return delay
		case wire.CodePing:
			select {
			case pingHeld <- struct{}{}:
			default:
			}
			return time.Hour
		}
		return 0
	}))
	c := login(t, s)

	start := time.Now()
	c.must(wire.GetStreamsRequest{})
	if d := time.Since(start); d < delay {
		t.Fatalf("GetStreams held for %v answered after %v", delay, d)
	}
	// Not held: each would otherwise wait an hour and fail on the client's 10 s deadline.
	c.must(wire.CreateStreamRequest{Name: "s"})
	c.must(wire.GetMeRequest{})
	mu.Lock()
	got := slices.Clone(seen)
	mu.Unlock()
	if want := []wire.Code{0, wire.CodeGetStreams, wire.CodeCreateStream, wire.CodeGetMe}; !slices.Equal(got, want) {
		t.Fatalf("hook saw codes %v, want %v", got, want)
	}

	p := login(t, s)
	frame := wire.AppendRequestHeader(nil, p.header(wire.CodePing), 0)
	if _, err := p.nc.Write(frame); err != nil {
		t.Fatalf("write ping: %v", err)
	}
	select {
	case <-pingHeld:
	case <-time.After(10 * time.Second):
		t.Fatal("the hook never saw the Ping")
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a held reply")
	}
	if hdr, _, err := p.readFrame(); err == nil {
		t.Fatalf("held Ping answered after Close: %x", hdr[:64])
	}
}
