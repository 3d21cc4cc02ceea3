package iggy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// Opt configures a Client (see Dial). Options are applied in order; a later one wins.
type Opt interface{ apply(*config) }

type optFunc func(*config)

func (f optFunc) apply(c *config) { f(c) }

// config holds every Client setting; defaultConfig is the only place defaults live.
type config struct {
	user, pass      string
	token           string
	tls             *tls.Config
	poolSize        int
	timeout         time.Duration
	heartbeat       time.Duration
	assignSync      time.Duration // 0 = only on the heartbeat
	reconnInitial   time.Duration
	reconnMax       time.Duration
	reconnAttempts  int // 0 = unlimited
	logger          *slog.Logger
	maxFrame        int
	protocolVersion uint32
	sdkName         string
	sdkVersion      string
	leaderWait      time.Duration // how long a leaderless roster is read again
}

func defaultConfig() config {
	return config{
		user:            "iggy",
		pass:            "iggy",
		poolSize:        2,
		timeout:         30 * time.Second,
		heartbeat:       5 * time.Second,
		assignSync:      time.Second,
		reconnInitial:   100 * time.Millisecond,
		reconnMax:       5 * time.Second,
		logger:          slog.Default(),
		maxFrame:        wire.MaxFrameSize,
		protocolVersion: wire.ProtocolVersion,
		sdkName:         "ferry-go",
		sdkVersion:      "0.1.0",
		leaderWait:      5 * time.Second,
	}
}

func (c *config) validate() error {
	var errs []error
	if c.token == "" && (c.user == "" || c.pass == "") {
		errs = append(errs, errors.New("credentials: username and password (or a token) are required"))
	}
	if c.poolSize < 1 || c.poolSize > 64 {
		errs = append(errs, fmt.Errorf("pool size %d: want 1..64", c.poolSize))
	}
	if c.timeout <= 0 {
		errs = append(errs, fmt.Errorf("request timeout %v: want > 0", c.timeout))
	}
	if c.heartbeat <= 0 {
		errs = append(errs, fmt.Errorf("heartbeat %v: want > 0", c.heartbeat))
	}
	if c.assignSync < 0 {
		errs = append(errs, fmt.Errorf("assignment sync %v: want ≥ 0", c.assignSync))
	}
	if c.reconnInitial <= 0 || c.reconnMax < c.reconnInitial || c.reconnAttempts < 0 {
		errs = append(errs, fmt.Errorf("reconnect (%v, %v, %d): want 0 < initial ≤ max, attempts ≥ 0", c.reconnInitial, c.reconnMax, c.reconnAttempts))
	}
	if c.maxFrame < 64<<10 || c.maxFrame > wire.MaxFrameSize {
		errs = append(errs, fmt.Errorf("max frame size %d: want 64 KiB..%d", c.maxFrame, wire.MaxFrameSize))
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("iggy: invalid options: %w", err)
	}
	return nil
}

// WithCredentials logs in with a username and password. Default: iggy / iggy (the
// embedded server's root user). It clears a token set earlier.
func WithCredentials(user, pass string) Opt {
	return optFunc(func(c *config) { c.user, c.pass, c.token = user, pass, "" })
}

// WithToken logs in with a personal access token instead of a password. Default: none
// (password login).
func WithToken(pat string) Opt { return optFunc(func(c *config) { c.token = pat }) }

// WithTLS connects over TLS with cfg (cloned; ServerName defaults to the host of the
// address). Default: plain TCP.
func WithTLS(cfg *tls.Config) Opt {
	return optFunc(func(c *config) {
		if cfg == nil {
			c.tls = nil
			return
		}
		c.tls = cfg.Clone()
	})
}

// WithPoolSize sets the number of connections plain requests are spread over (each has
// one request in flight at a time). Default 2. Consumers get their own connection on
// top of these.
func WithPoolSize(n int) Opt { return optFunc(func(c *config) { c.poolSize = n }) }

// WithRequestTimeout bounds every request: writing it, reading its reply, transient
// replays and any reconnect it has to wait for. Default 30s. A context deadline that
// is sooner wins.
func WithRequestTimeout(d time.Duration) Opt { return optFunc(func(c *config) { c.timeout = d }) }

// WithHeartbeat sets how often an idle connection pings the server; a Consumer's
// connection re-syncs its assignment at least this often (the sync is its keepalive).
// Default 5s. It must stay well below the server's stale-client limit (1.2 × its heartbeat
// interval, 36 s by default).
func WithHeartbeat(d time.Duration) Opt { return optFunc(func(c *config) { c.heartbeat = d }) }

// WithAssignmentSync sets how often a Consumer re-syncs its assignment
// (SyncConsumerGroup on its member connection, one per interval, never overlapping one
// of its polls), so that it learns within d that a partition moved to it or away from
// it — e.g. a partition pending revocation handed over once its previous owner
// committed. A Consumer with nothing to poll (no partition owned, or all paused) also
// syncs at once when Poll is called, at most every 100ms. Default 1s; 0 (or anything
// above the heartbeat) means the heartbeat interval.
func WithAssignmentSync(d time.Duration) Opt { return optFunc(func(c *config) { c.assignSync = d }) }

// syncEvery is the interval of a Consumer's background assignment sync.
func (c *config) syncEvery() time.Duration {
	if c.assignSync > 0 && c.assignSync < c.heartbeat {
		return c.assignSync
	}
	return c.heartbeat
}

// WithReconnect sets the reconnect backoff: the first wait, the longest wait, and how
// many consecutive attempts a request waits for (0 = unlimited, until the request's
// deadline or Close). Default 100ms, 5s, unlimited.
func WithReconnect(initial, max time.Duration, attempts int) Opt {
	return optFunc(func(c *config) { c.reconnInitial, c.reconnMax, c.reconnAttempts = initial, max, attempts })
}

// WithLogger sets the logger for connection events. Default slog.Default().
func WithLogger(l *slog.Logger) Opt { return optFunc(func(c *config) { c.logger = l }) }

// WithMaxFrameSize caps the size of a frame (256-byte header included) in both
// directions: larger sends are refused before sending, larger replies end the
// connection. Default 64 MiB, the server's limit.
func WithMaxFrameSize(n int) Opt { return optFunc(func(c *config) { c.maxFrame = n }) }
