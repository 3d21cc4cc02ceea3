package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
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
	DefaultAddr            = "127.0.0.1:8090"
	DefaultRootUsername    = "iggy"
	DefaultRootPassword    = "iggy"
	DefaultMaxFrameSize    = wire.MaxFrameSize
	DefaultMaxPollMessages = 100_000
	DefaultMaxPollBytes    = 16 << 20
	DefaultMaxConnections  = 10_000
	// DefaultMaxConnectionsPerIP caps the connections of one client IP address.
	DefaultMaxConnectionsPerIP = 1_000
	// DefaultLoginTimeout is how long a new connection may stay without a login.
	DefaultLoginTimeout = 10 * time.Second
	// DefaultFrameReadTimeout bounds reading the rest of a frame once its first byte came.
	DefaultFrameReadTimeout = 30 * time.Second
	// DefaultMaxUnauthenticatedFrame caps a frame (header included) before login: only
	// pings and logins are served then, and they are small.
	DefaultMaxUnauthenticatedFrame = 16 << 10
	// DefaultUnauthenticatedBudget caps the bytes a connection may send before it logs in.
	DefaultUnauthenticatedBudget = 256 << 10
	// DefaultMaxPendingBytes caps the bytes buffered, over all connections, for frames
	// not yet fully read.
	DefaultMaxPendingBytes = 512 << 20
	// DefaultMaxReplyBytes caps the bytes held, over all connections, by poll replies
	// being built or waiting to be written: four polls of DefaultMaxPollBytes at once.
	DefaultMaxReplyBytes = 128 << 20
	// DefaultMaxPartitionsPerTopic caps the partitions of one topic.
	DefaultMaxPartitionsPerTopic = 10_000
	// DefaultMaxPartitions caps the partitions of all topics together.
	DefaultMaxPartitions = 100_000
	// DefaultLoginFailureDelay is the delay after the first failed login of an IP
	// address; it doubles with every further failure up to DefaultLoginMaxDelay.
	DefaultLoginFailureDelay = 100 * time.Millisecond
	// DefaultLoginMaxDelay caps the delay of DefaultLoginFailureDelay.
	DefaultLoginMaxDelay = 5 * time.Second
	// DefaultLoginUserNamesPerIP is how many user names with failed logins one IP
	// address may have on record before the address itself is delayed.
	DefaultLoginUserNamesPerIP = 10
	// DefaultMaxLoginsPerIP is how many password checks of one client IP address may
	// run or wait at once.
	DefaultMaxLoginsPerIP = 8

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
	// RootUsername and RootPassword are the root user's credentials. On the first boot
	// of a data directory they create the root user; on a later boot, when RootPassword
	// is set, they replace the root user's username and password (a start with
	// credentials never leaves older ones in force). Unset, the password defaults to
	// iggy (and the username to iggy) on a loopback address only, and an existing
	// root user is kept. New and Start refuse a listen address that is not loopback
	// (decided on the address the listener really bound) without an explicit password,
	// or with the default password "iggy".
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
	// closed at once, unless a connection that has not logged in yet can make room: the
	// oldest such connection is then closed instead, so idle unauthenticated connections
	// can never lock clients out. Default 10,000.
	MaxConnections int
	// MaxConnectionsPerIP caps concurrent connections from one client IP address; a
	// connection beyond it is closed at once. Default 1,000.
	MaxConnectionsPerIP int
	// LoginTimeout is how long a new connection may stay without logging in before it
	// is closed. Default 10s.
	LoginTimeout time.Duration
	// FrameReadTimeout bounds how long the rest of a frame may take once its first byte
	// arrived; a slower frame closes the connection. Default 30s.
	FrameReadTimeout time.Duration
	// MaxUnauthenticatedFrame caps a frame (header included) of a connection that has
	// not logged in; a larger one closes the connection before its body is read.
	// Default 16 KiB.
	MaxUnauthenticatedFrame uint32
	// UnauthenticatedBudget caps the bytes a connection may send before it logs in; more
	// closes it. Default 256 KiB.
	UnauthenticatedBudget int64
	// MaxPendingBytes caps the memory, over all connections, buffered for request
	// frames still being read; a frame that would exceed it closes its connection.
	// Bodies are buffered as they arrive, never allocated whole from the declared
	// length. Default 512 MiB.
	MaxPendingBytes int64
	// MaxReplyBytes caps the memory, over all connections, held by poll replies being
	// built or waiting to be written. A poll that reads messages first reserves twice
	// what it may load (its batches and its reply: min(MaxPollBytes, MaxReplyBytes/2,
	// the partition's size)) and waits, first come first served, while that does not
	// fit; once built, it holds its reply's size until the reply is written. Polls
	// that find nothing to read reserve nothing. Default 128 MiB.
	MaxReplyBytes int64
	// MaxPartitionsPerTopic caps the partitions of one topic: a CreateTopic or
	// CreatePartitions that would pass it is refused with 2015 TooManyPartitions.
	// Default 10,000.
	MaxPartitionsPerTopic int
	// MaxPartitions caps the partitions of all topics of the server together, refused
	// the same way. Default 100,000.
	MaxPartitions int
	// LoginFailureDelay is how long the next login attempt of an (IP address, user
	// name) pair waits after a failed one; it doubles with every further consecutive
	// failure of the pair, up to LoginMaxDelay, and a successful login of the pair
	// resets it. The right password waits too (it cannot be told from a guess before it
	// is checked); other user names from the same address do not, until the address has
	// more than LoginUserNamesPerIP names with failures: then every attempt from it
	// waits the same schedule counted on the names beyond. A failure is forgotten after
	// max(1 minute, 2 × LoginMaxDelay). Default 100ms; negative turns the delays off.
	LoginFailureDelay time.Duration
	// LoginMaxDelay caps LoginFailureDelay's doubling. Default 5s.
	LoginMaxDelay time.Duration
	// LoginUserNamesPerIP is how many user names with failed logins an IP address may
	// have on record before every login from it is delayed (see LoginFailureDelay).
	// Default 10.
	LoginUserNamesPerIP int
	// MaxConcurrentLogins bounds the password hashes computed at once (each is a
	// deliberate ~100 ms of CPU), so password guessing cannot starve served clients.
	// Default max(1, GOMAXPROCS/2). Slots go to client IP addresses in turn (one hash
	// each), so a flood from one address delays another address's login by at most one
	// hash per slot; a login waiting for a slot gives up when its connection closes or
	// its LoginTimeout passes. A password that matched before, a token and a throttle
	// delay need no slot.
	MaxConcurrentLogins int
	// MaxLoginsPerIP caps the password checks of one client IP address running or
	// waiting for a MaxConcurrentLogins slot; a login beyond it is refused at once,
	// without a hash, with eviction 12 (SessionError). Default 8.
	MaxLoginsPerIP int
	// HeartbeatInterval is Iggy's [heartbeat] interval: a consumer-group member silent
	// for more than 1.2 × this is evicted (Eviction 13). Default 30s.
	HeartbeatInterval time.Duration
	// RebalancingTimeout bounds how long a partition with in-flight data stays pending
	// revocation after a cooperative rebalance. Default 30s.
	RebalancingTimeout time.Duration
	// PasswordIterations is the PBKDF2 cost of password hashes created by this server
	// (root on first boot). Default the store's (600,000); tests lower it.
	PasswordIterations int
	// DiskReserve is the size of the reserve file kept in the data directory and given
	// up on a full disk, so the server turns to refusing writes (4006) instead of
	// failing in the middle of one. Default 64 MiB; negative turns it off, which saves
	// the space but lets the first "no space left" hit Pebble in the middle of its own
	// work (a log write, a flush), which it cannot continue from: writes then stay
	// refused until a restart instead of resuming once room is back. Start refuses a
	// data directory without a database whose volume has no room for the reserve (the
	// error matches store.ErrNoRoomForReserve, says what is free and leaves nothing
	// created); one with a database is opened read-only instead.
	DiskReserve int64
	// StorageProbeInterval is how often the data directory is checked to still exist
	// and be writable. Default 1s; negative turns the probe off.
	StorageProbeInterval time.Duration
	// InitDataDir allows starting on an empty data directory where one with data used to
	// be. Without it, Start refuses a missing DataDir that a server used before: the first
	// boot leaves a marker next to the directory (".<name>.ferry-data" in its parent), so
	// a deleted or unmounted data dir is an error, not a silent fresh start with a new
	// root user.
	InitDataDir bool
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

	// WriteFault is a hook for tests: it lets a test make storage fail on demand, as a
	// full disk does, and end the fault when it chooses. Nil (the default) means no hook
	// and costs nothing. When set, it is called before every write of the store
	// (appends, consumer offsets, metadata), concurrently, so it must be safe for
	// concurrent use; while it returns an error, each write is refused as in a storage
	// fault (the request is answered with 4006 CannotSaveMessagesToSegment) and reads and
	// polls are served. Unlike a real fault it is not reported by StorageFault, and
	// writes are accepted again as soon as it returns nil.
	WriteFault func() error

	// rootExplicit is set by validate when RootPassword was given (not defaulted).
	rootExplicit bool
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
	if c.MaxConnectionsPerIP == 0 {
		c.MaxConnectionsPerIP = DefaultMaxConnectionsPerIP
	}
	if c.LoginTimeout == 0 {
		c.LoginTimeout = DefaultLoginTimeout
	}
	if c.FrameReadTimeout == 0 {
		c.FrameReadTimeout = DefaultFrameReadTimeout
	}
	if c.MaxUnauthenticatedFrame == 0 {
		c.MaxUnauthenticatedFrame = DefaultMaxUnauthenticatedFrame
	}
	if c.UnauthenticatedBudget == 0 {
		c.UnauthenticatedBudget = DefaultUnauthenticatedBudget
	}
	if c.MaxPendingBytes == 0 {
		c.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if c.MaxReplyBytes == 0 {
		c.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if c.MaxPartitionsPerTopic == 0 {
		c.MaxPartitionsPerTopic = DefaultMaxPartitionsPerTopic
	}
	if c.MaxPartitions == 0 {
		c.MaxPartitions = DefaultMaxPartitions
	}
	if c.LoginFailureDelay == 0 {
		c.LoginFailureDelay = DefaultLoginFailureDelay
	}
	if c.LoginMaxDelay == 0 {
		c.LoginMaxDelay = DefaultLoginMaxDelay
	}
	if c.LoginUserNamesPerIP == 0 {
		c.LoginUserNamesPerIP = DefaultLoginUserNamesPerIP
	}
	if c.MaxConcurrentLogins == 0 {
		c.MaxConcurrentLogins = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if c.MaxLoginsPerIP == 0 {
		c.MaxLoginsPerIP = DefaultMaxLoginsPerIP
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
	if err := checkPublicCredentials(isLoopback(host), c.Addr, c.RootPassword); err != nil {
		return err
	}
	c.rootExplicit = c.RootPassword != ""
	if c.RootUsername == "" {
		c.RootUsername = DefaultRootUsername
	}
	if c.RootPassword == "" {
		c.RootPassword = DefaultRootPassword
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
	case c.MaxConnections < 0 || c.MaxConnectionsPerIP < 0:
		return fmt.Errorf("%w: MaxConnections and MaxConnectionsPerIP must not be negative", ErrConfig)
	case c.LoginTimeout < 0 || c.FrameReadTimeout < 0 || c.LoginMaxDelay < 0:
		return fmt.Errorf("%w: LoginTimeout, FrameReadTimeout and LoginMaxDelay must not be negative", ErrConfig)
	case c.MaxUnauthenticatedFrame < wire.HeaderSize || c.UnauthenticatedBudget < int64(c.MaxUnauthenticatedFrame):
		return fmt.Errorf("%w: MaxUnauthenticatedFrame must be at least %d and UnauthenticatedBudget at least MaxUnauthenticatedFrame", ErrConfig, wire.HeaderSize)
	case c.MaxPendingBytes < 0 || c.MaxConcurrentLogins < 0 || c.LoginUserNamesPerIP < 0 || c.MaxLoginsPerIP < 0:
		return fmt.Errorf("%w: MaxPendingBytes, MaxConcurrentLogins, MaxLoginsPerIP and LoginUserNamesPerIP must not be negative", ErrConfig)
	case c.MaxReplyBytes < 2*wire.HeaderSize:
		return fmt.Errorf("%w: MaxReplyBytes %d is below %d", ErrConfig, c.MaxReplyBytes, 2*wire.HeaderSize)
	case c.MaxPartitionsPerTopic < 0 || c.MaxPartitions < 0:
		return fmt.Errorf("%w: MaxPartitionsPerTopic and MaxPartitions must not be negative", ErrConfig)
	case c.HeartbeatInterval < 0 || c.RebalancingTimeout < 0:
		return fmt.Errorf("%w: HeartbeatInterval and RebalancingTimeout must be positive", ErrConfig)
	case c.PasswordIterations < 0:
		return fmt.Errorf("%w: PasswordIterations is negative", ErrConfig)
	}
	return nil
}

// checkPublicCredentials refuses the default root password (unset, or set to
// DefaultRootPassword) on a listen address that is not loopback.
func checkPublicCredentials(loopback bool, addr, password string) error {
	if loopback {
		return nil
	}
	if password == "" {
		return fmt.Errorf("%w: Addr %q is not a loopback address: set RootUsername and RootPassword explicitly (the default iggy/iggy is allowed on loopback only)", ErrConfig, addr)
	}
	if password == DefaultRootPassword {
		return fmt.Errorf("%w: Addr %q is not a loopback address: RootPassword must not be the default %q there", ErrConfig, addr, DefaultRootPassword)
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
