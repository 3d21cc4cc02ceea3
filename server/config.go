package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// Fsync policies of Config.Fsync.
const (
	// FsyncAlways syncs every acknowledged write before the reply (the default).
	FsyncAlways = "always"
	// FsyncInterval syncs the write-ahead log every Config.FsyncInterval: a crash may
	// lose the acknowledged writes of the last interval, never part of one.
	FsyncInterval = "interval"
)

// Defaults of Config.
const (
	DefaultAddr               = "127.0.0.1:8090"
	DefaultRootUsername       = "iggy"
	DefaultRootPassword       = "iggy"
	DefaultMaxFrameSize       = wire.MaxFrameSize
	DefaultMaxPollMessages    = 100_000
	DefaultMaxPollBytes       = 16 << 20
	DefaultMaxConnections     = 10_000
	DefaultHeartbeatInterval  = 30 * time.Second
	DefaultRebalancingTimeout = 30 * time.Second
	DefaultFsyncInterval      = 100 * time.Millisecond
	// DefaultRetentionInterval is Iggy's [data_maintenance.messages] interval.
	DefaultRetentionInterval = time.Minute
)

// Config configures a Server. The zero value is valid except for DataDir; New fills
// the defaults and validates. Config is a plain struct: no functional options.
type Config struct {
	// Addr is the TCP listen address. Default DefaultAddr ("127.0.0.1:8090"); a port of
	// 0 picks a free port (read it back with Server.Addr).
	Addr string
	// DataDir is the directory of the store (created if missing). Required.
	DataDir string
	// Fsync is FsyncAlways (default) or FsyncInterval.
	Fsync string
	// FsyncInterval is the sync period of FsyncInterval. Default 100ms.
	FsyncInterval time.Duration
	// RootUsername and RootPassword are the root user's credentials, applied on the
	// first boot of a data directory only. They default to iggy/iggy, but only when Addr
	// is a loopback address: New refuses a non-loopback address without both.
	RootUsername, RootPassword string
	// Logger receives the server's logs. Default: a logger that discards everything.
	Logger *slog.Logger
	// MaxFrameSize bounds a request frame, header included. Default 64 MiB; a larger
	// frame closes the connection.
	MaxFrameSize uint32
	// MaxPollMessages caps the count of one poll. Default 100,000.
	MaxPollMessages uint32
	// MaxPollBytes caps the stored bytes one poll loads (the first batch is always
	// served whole). Default 16 MiB.
	MaxPollBytes uint64
	// MaxConnections caps concurrent client connections; a connection beyond it is
	// closed at once. Default 10,000.
	MaxConnections int
	// HeartbeatInterval is Iggy's [heartbeat] interval: a consumer-group member silent
	// for more than 1.2 × this is evicted (Eviction 13). Default 30s.
	HeartbeatInterval time.Duration
	// RebalancingTimeout bounds how long a partition with in-flight data stays pending
	// revocation after a cooperative rebalance. Default 30s.
	RebalancingTimeout time.Duration
	// PasswordIterations is the PBKDF2 cost of password hashes created by this server
	// (root on first boot). Default the store's (600,000); tests lower it.
	PasswordIterations int
	// TLS, when set, makes the listener speak TLS.
	TLS *tls.Config
	// RetentionInterval is how often the segment cleaner enforces every topic's
	// message_expiry and max_topic_size (Iggy's [data_maintenance.messages]
	// interval). Default 1 minute; negative turns the background cleaner off
	// (Server.EnforceRetention still runs a pass on demand).
	RetentionInterval time.Duration
	// Now is the server's clock: it stamps message timestamps and is the "now"
	// of retention. Default time.Now; tests pass a fake clock to expire
	// messages without waiting. It must be safe for concurrent use.
	Now func() time.Time

	// ReplyDelay is a hook for tests: it lets a test make the server slow on purpose.
	// Nil (the default) means no hook and costs nothing; it is not part of the wire
	// protocol. When set, it is called on the connection's goroutine for every request
	// frame once its header is decoded and before the request is handled, with the
	// request's command code (wire.RequestHeader.CommandCode: 0 for a login by
	// OpRegister), and the connection holds the request for the duration it returns
	// (0 or negative: not held) before handling it and writing its reply. A held request
	// pins its connection as a slow handler would: the connection's later requests wait
	// behind it (other connections do not). Close ends every hold at once: the held
	// request is then dropped unhandled, so Close never waits for a delay. A hold is not
	// cut short by the client disconnecting. ReplyDelay must be safe for concurrent use
	// (connections call it in parallel) and should return quickly.
	ReplyDelay func(code wire.Code) time.Duration

	// ClusterRoster is a hook for tests of leader-aware clients: it lets one embedded
	// server pose as a node of a cluster. Nil (the default) means no hook: the server
	// answers GetClusterMetadata with a one-node roster, itself as the healthy leader.
	// When set, GetClusterMetadata answers what it returns, and while that roster marks
	// this server (the node whose IP and TCP port are those of Server.Addr) as a
	// follower, the server refuses every replicated request, metadata operations
	// (128–149) and partition operations (160–162), with 58 TransientNotAccepted
	// (result-framed for metadata, in the header status for partition operations), as a
	// follower of an Iggy cluster does; logins, reads and polls are still served. It is
	// called for every GetClusterMetadata and every replicated request, concurrently, so
	// it must be safe for concurrent use; the test may switch what it returns at any time
	// (a leader change).
	ClusterRoster func() wire.ClusterMetadata
}

// ErrConfig is matched by every validation error of New.
var ErrConfig = errors.New("server: invalid config")

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Fsync == "" {
		c.Fsync = FsyncAlways
	}
	if c.FsyncInterval == 0 {
		c.FsyncInterval = DefaultFsyncInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = DefaultMaxFrameSize
	}
	if c.MaxPollMessages == 0 {
		c.MaxPollMessages = DefaultMaxPollMessages
	}
	if c.MaxPollBytes == 0 {
		c.MaxPollBytes = DefaultMaxPollBytes
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.RebalancingTimeout == 0 {
		c.RebalancingTimeout = DefaultRebalancingTimeout
	}
	if c.RetentionInterval == 0 {
		c.RetentionInterval = DefaultRetentionInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

func (c *Config) validate() error {
	if c.DataDir == "" {
		return fmt.Errorf("%w: DataDir is required", ErrConfig)
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("%w: Addr %q: %w", ErrConfig, c.Addr, err)
	}
	if c.RootUsername == "" && c.RootPassword == "" {
		if !isLoopback(host) {
			return fmt.Errorf("%w: Addr %q is not a loopback address: set RootUsername and RootPassword explicitly (the default iggy/iggy is allowed on loopback only)", ErrConfig, c.Addr)
		}
		c.RootUsername, c.RootPassword = DefaultRootUsername, DefaultRootPassword
	}
	if c.RootUsername == "" || c.RootPassword == "" {
		return fmt.Errorf("%w: RootUsername and RootPassword must be set together", ErrConfig)
	}
	if n := len(c.RootUsername); n < 3 || n > 50 {
		return fmt.Errorf("%w: RootUsername must be 3..50 bytes", ErrConfig)
	}
	if n := len(c.RootPassword); n < 3 || n > 100 {
		return fmt.Errorf("%w: RootPassword must be 3..100 bytes", ErrConfig)
	}
	if c.Fsync != FsyncAlways && c.Fsync != FsyncInterval {
		return fmt.Errorf("%w: Fsync %q: want %q or %q", ErrConfig, c.Fsync, FsyncAlways, FsyncInterval)
	}
	switch {
	case c.FsyncInterval < 0:
		return fmt.Errorf("%w: FsyncInterval is negative", ErrConfig)
	case c.MaxFrameSize < wire.HeaderSize || c.MaxFrameSize > wire.MaxFrameSize:
		return fmt.Errorf("%w: MaxFrameSize %d outside [%d, %d]", ErrConfig, c.MaxFrameSize, wire.HeaderSize, wire.MaxFrameSize)
	case c.MaxConnections < 0:
		return fmt.Errorf("%w: MaxConnections is negative", ErrConfig)
	case c.HeartbeatInterval < 0 || c.RebalancingTimeout < 0:
		return fmt.Errorf("%w: HeartbeatInterval and RebalancingTimeout must be positive", ErrConfig)
	case c.PasswordIterations < 0:
		return fmt.Errorf("%w: PasswordIterations is negative", ErrConfig)
	}
	return nil
}

// isLoopback reports whether host (from an address) only accepts local connections.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
