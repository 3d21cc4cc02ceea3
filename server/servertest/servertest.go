// Package servertest starts Ferry's embedded Iggy server for tests: a random loopback
// port, a t.TempDir data directory, cheap password hashing, and t.Cleanup to close it.
//
// It must not import the client (github.com/ferryio/ferry/iggy): tests of the client
// import this package, never the reverse.
package servertest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server"
)

// Root credentials of every server this package starts.
const (
	Username = "iggy"
	Password = "iggy"
)

// Option changes the Config Start uses.
type Option func(*server.Config)

// WithFsync sets the fsync policy (server.FsyncAlways, the default, or
// server.FsyncInterval).
func WithFsync(policy string) Option { return func(c *server.Config) { c.Fsync = policy } }

// WithHeartbeatInterval sets the heartbeat interval (default 30s); members silent for
// 1.2 × it are evicted.
func WithHeartbeatInterval(d time.Duration) Option {
	return func(c *server.Config) { c.HeartbeatInterval = d }
}

// WithRebalancingTimeout sets how long a pending revocation may wait (default 30s).
func WithRebalancingTimeout(d time.Duration) Option {
	return func(c *server.Config) { c.RebalancingTimeout = d }
}

// WithDataDir uses dir instead of a fresh t.TempDir (restart tests pass the same dir to
// two servers in turn).
func WithDataDir(dir string) Option { return func(c *server.Config) { c.DataDir = dir } }

// WithLogger sends the server's logs to l (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(c *server.Config) { c.Logger = l } }

// WithReplyDelay makes the server slow on purpose (server.Config.ReplyDelay, a test
// hook): each request is held for delay(code) before it is handled and answered, code
// being its command (wire.CodePollMessages, ...; 0 for a login); 0 = not held. A held
// request also delays the later requests of its connection. delay is called on the
// server's connection goroutines, concurrently, so it must be safe for concurrent use
// (count requests with sync/atomic). Close ends every hold at once.
func WithReplyDelay(delay func(code wire.Code) time.Duration) Option {
	return func(c *server.Config) { c.ReplyDelay = delay }
}

// WithClusterRoster makes the server answer GetClusterMetadata with roster() instead of
// its one-node roster (server.Config.ClusterRoster, a test hook), and refuse replicated
// requests with 58 TransientNotAccepted while that roster marks it a follower. roster is
// called concurrently and may change what it returns at any time (a leader change).
func WithClusterRoster(roster func() wire.ClusterMetadata) Option {
	return func(c *server.Config) { c.ClusterRoster = roster }
}

// WithWriteFault makes storage fail on demand (server.Config.WriteFault, a test hook):
// while fault returns an error, every write of the store is refused as on a full disk
// (the request is answered with 4006), reads and polls are served. fault is called on
// the server's goroutines, concurrently, so it must be safe for concurrent use (switch
// it with sync/atomic).
func WithWriteFault(fault func() error) Option {
	return func(c *server.Config) { c.WriteFault = fault }
}

// WithConfig applies fn to the Config last, for anything else.
func WithConfig(fn func(*server.Config)) Option { return fn }

// Start starts a server and waits until it accepts connections (10 s at most, else
// t.Fatal). The server is closed by t.Cleanup; Close may also be called earlier.
func Start(t testing.TB, opts ...Option) *server.Server {
	t.Helper()
	cfg := server.Config{
		Addr:               "127.0.0.1:0",
		RootUsername:       Username,
		RootPassword:       Password,
		PasswordIterations: 1000,
		// Tests log in wrongly on purpose; keep the login throttle's delays short
		// (WithConfig sets the real schedule where a test is about it).
		LoginFailureDelay: time.Millisecond,
		LoginMaxDelay:     10 * time.Millisecond,
		DiskReserve:       1 << 20,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := server.New(cfg)
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("servertest: close: %v", err)
		}
	})
	if err := s.Start(ctx); err != nil {
		t.Fatalf("servertest: start: %v", err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("servertest: not ready: %v", err)
	}
	return s
}
