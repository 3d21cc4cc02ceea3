package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/store"
)

// ErrClosed is returned by Start, Ready and ServeConn once Close has begun.
var ErrClosed = errors.New("server: closed")

// Server is one embedded Iggy server. Create it with New, then Start it; every method is
// safe for concurrent use, and Close is safe on a nil *Server.
type Server struct {
	cfg Config
	log *slog.Logger

	st    *store.Store
	ln    net.Listener
	ready chan struct{} // closed when Start succeeded
	quit  chan struct{} // closed when Close begins

	mu       sync.Mutex // guards the fields below
	started  bool
	closing  bool
	startErr error
	conns    map[*conn]struct{}
	perIP    map[string]int // open connections per client IP
	wg       sync.WaitGroup

	pending  atomic.Int64 // bytes buffered for frames still arriving (Config.MaxPendingBytes)
	throttle *loginThrottle
	hashes   *hashGate
	refusals *rateLog     // the log lines clients can cause at will, at a bounded rate
	replies  *replyBudget // poll replies being built or written (Config.MaxReplyBytes)

	// beforeReply, set only by tests, is called on the connection's goroutine with
	// every reply built and not yet written (its reply budget still held).
	beforeReply atomic.Pointer[func(code wire.Code)]
	// loginWait, set only by tests, replaces the login throttle's wait: it is called
	// with every delay imposed on an attempt, which then goes on at once.
	loginWait atomic.Pointer[func(d time.Duration)]

	closeOnce sync.Once
	closeErr  error

	// meta serializes metadata-plane operations (and group membership changes) so the
	// store's topology and the in-memory group state move together.
	meta sync.Mutex

	groups    *groups
	rrMu      sync.Mutex
	rr        map[[2]uint32]uint32 // Balanced partitioning round-robin per topic
	sessions  atomic.Uint64        // last session id issued
	connIDs   atomic.Uint32        // last connection (client) id issued
	startedAt time.Time
}

// New validates cfg, fills its defaults and returns a server that is not listening yet.
// Errors match ErrConfig.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:   cfg,
		log:   cfg.Logger,
		ready: make(chan struct{}),
		quit:  make(chan struct{}),
		conns: make(map[*conn]struct{}),
		perIP: make(map[string]int),
		rr:    make(map[[2]uint32]uint32),
	}
	s.throttle = newLoginThrottle(cfg.LoginFailureDelay, cfg.LoginMaxDelay, cfg.LoginUserNamesPerIP, cfg.Now)
	s.hashes = newHashGate(cfg.MaxConcurrentLogins, cfg.MaxLoginsPerIP)
	s.refusals = newRateLog(cfg.Logger, refusalLogInterval, cfg.Now)
	s.replies = newReplyBudget(cfg.MaxReplyBytes)
	s.groups = newGroups(s)
	return s, nil
}

// Start creates a server from cfg and starts it: the "Start(ctx, cfg) → address, Close"
// shape of the embedding API. The caller must Close the returned server.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, errors.Join(err, s.Close(context.Background()))
	}
	return s, nil
}

// Start opens the data directory, creates the root user on first boot and starts
// listening. ctx bounds only the start itself; the server runs until Close. It fails
// with an error matching store.ErrLocked when another server holds the data directory,
// and with ErrClosed after Close. Start may be called once.
func (s *Server) Start(ctx context.Context) (err error) {
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		return ErrClosed
	case s.started:
		s.mu.Unlock()
		return errors.New("server: already started")
	}
	s.started = true
	s.mu.Unlock()
	defer func() {
		if err != nil {
			s.mu.Lock()
			s.startErr = err
			s.mu.Unlock()
		}
	}()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("server: start: %w", err)
	}
	policy := store.FsyncAlways
	if s.cfg.Fsync == FsyncInterval {
		policy = store.FsyncInterval
	}
	marker, err := s.checkDataDir()
	if err != nil {
		return err
	}
	st, err := s.openStore(ctx, store.Options{
		Dir:                s.cfg.DataDir,
		Fsync:              policy,
		FsyncInterval:      s.cfg.FsyncInterval,
		Logger:             s.log,
		PasswordIterations: s.cfg.PasswordIterations,
		Now:                s.cfg.Now,
		DiskReserve:        s.cfg.DiskReserve,
		ProbeInterval:      s.cfg.StorageProbeInterval,
		WriteFault:         s.cfg.WriteFault,
	})
	if re := (*store.ReserveError)(nil); errors.As(err, &re) {
		return fmt.Errorf("server: data dir %s: %w; free space there, or start with a smaller reserve: --disk-reserve of ferry server, [embedded] disk_reserve of ferry run (0 turns the reserve off)", s.cfg.DataDir, re)
	}
	if err != nil {
		return fmt.Errorf("server: open data dir %s: %w", s.cfg.DataDir, err)
	}
	if marker != "" {
		if err := os.WriteFile(marker, []byte(absDir(s.cfg.DataDir)+"\n"), 0o600); err != nil {
			s.log.Warn("cannot record the data dir next to it; a deleted data dir will not be told from a first boot", "marker", marker, "err", err)
		}
	}
	if err := st.Fault(); err != nil {
		s.log.Error("data dir opened read-only: sends and other writes are refused (4006)", "err", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return errors.Join(fmt.Errorf("server: listen on %s: %w", s.cfg.Addr, err), st.Close())
	}
	// The guard of validate saw the configured host; decide again on the address the
	// listener really bound (a name may resolve to a public address).
	if err := s.checkBound(ln.Addr()); err != nil {
		return errors.Join(err, ln.Close(), st.Close())
	}
	if err := s.ensureRoot(st); err != nil {
		return errors.Join(err, ln.Close(), st.Close())
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.sessions.Store(uint64(time.Now().UnixMicro())) // strictly increasing across restarts too
	s.startedAt = time.Now()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errors.Join(ErrClosed, ln.Close(), st.Close())
	}
	s.st, s.ln = st, ln
	s.mu.Unlock()
	s.spawn(s.acceptLoop)
	s.spawn(s.maintenanceLoop)
	if s.cfg.RetentionInterval > 0 {
		s.spawn(s.retentionLoop)
	}
	close(s.ready)
	s.log.Info("iggy server listening", "addr", ln.Addr().String(), "data", s.cfg.DataDir, "fsync", s.cfg.Fsync)
	return nil
}

// ErrDataDirMissing is matched by Start's error when the data directory a server used
// before is missing (see Config.InitDataDir).
var ErrDataDirMissing = errors.New("server: data directory missing")

// checkDataDir refuses a missing data directory that a server used before, unless
// Config.InitDataDir; it returns the marker to write once the store is open ("" when
// it already exists).
func (s *Server) checkDataDir() (string, error) {
	dir := absDir(s.cfg.DataDir)
	marker := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".ferry-data")
	_, dirErr := os.Stat(dir)
	_, markErr := os.Stat(marker)
	switch {
	case errors.Is(dirErr, fs.ErrNotExist) && markErr == nil && !s.cfg.InitDataDir:
		return "", fmt.Errorf("%w: %s does not exist, but a server stored data there before (recorded in %s): restore or remount it, or start with --init (Config.InitDataDir) to begin with an empty data directory", ErrDataDirMissing, dir, marker)
	case markErr == nil:
		return "", nil
	}
	return marker, nil
}

func absDir(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}

// openStore opens the store, giving up when ctx ends first (a signal during a slow
// recovery): the open then finishes in the background and its store is closed.
func (s *Server) openStore(ctx context.Context, o store.Options) (*store.Store, error) {
	type opened struct {
		st  *store.Store
		err error
	}
	done := make(chan opened, 1)
	go func() {
		st, err := store.Open(o)
		done <- opened{st, err}
	}()
	select {
	case r := <-done:
		return r.st, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.st != nil {
				_ = r.st.Close()
			}
		}()
		return nil, fmt.Errorf("start abandoned while opening the store: %w", ctx.Err())
	}
}

// StorageFault reports the data directory's fault (full disk, read-only or vanished
// directory: writes are refused with 4006 while reads are served), or nil when
// healthy or not started.
func (s *Server) StorageFault() error {
	s.mu.Lock()
	st := s.st
	s.mu.Unlock()
	if st == nil {
		return nil
	}
	return st.Fault()
}

// checkBound applies the default-credentials guard to the bound address.
func (s *Server) checkBound(a net.Addr) error {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return nil
	}
	pw := s.cfg.RootPassword
	if !s.cfg.rootExplicit {
		pw = ""
	}
	return checkPublicCredentials(ta.IP.IsLoopback(), ta.String(), pw)
}

// ensureRoot creates the root user on first boot, and on a later boot started with an
// explicit password makes the configured credentials the root user's.
func (s *Server) ensureRoot(st *store.Store) error {
	root, created, err := st.EnsureRoot(s.cfg.RootUsername, s.cfg.RootPassword)
	if err != nil {
		return fmt.Errorf("server: root user: %w", err)
	}
	if created {
		s.log.Info("created root user", "username", root.Username)
		return nil
	}
	if !s.cfg.rootExplicit {
		return nil
	}
	changed, err := st.SetRootCredentials(s.cfg.RootUsername, s.cfg.RootPassword)
	if err != nil {
		return fmt.Errorf("server: apply the configured root credentials to the existing root user %q: %w", root.Username, err)
	}
	if changed {
		s.log.Warn("root user credentials replaced by the configured ones", "old_username", root.Username, "username", s.cfg.RootUsername)
	}
	return nil
}

// Ready waits until the server accepts connections. It returns the start error if Start
// failed, ErrClosed if the server closed first, or ctx's error.
func (s *Server) Ready(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.ready:
			return nil
		case <-s.quit:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			s.mu.Lock()
			err := s.startErr
			s.mu.Unlock()
			if err != nil {
				return err
			}
		}
	}
}

// Addr returns the address the server listens on ("host:port", with the real port when
// Config.Addr asked for port 0), or Config.Addr before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.cfg.Addr
}

// Close stops listening, closes every connection (their sessions end as on a
// disconnect), waits for every goroutine the server started and closes the store.
// It is idempotent and safe on nil; later calls wait for and return the first call's
// result. ctx is accepted for symmetry: goroutines end promptly once their sockets close,
// so Close always completes.
func (s *Server) Close(ctx context.Context) error {
	if s == nil {
		return nil
	}
	_ = ctx
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		ln := s.ln
		conns := make([]*conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		close(s.quit)
		var errs []error
		if ln != nil {
			if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, fmt.Errorf("server: close listener: %w", err))
			}
		}
		for _, c := range conns {
			c.closeNow(ErrClosed)
		}
		s.wg.Wait()
		s.mu.Lock()
		st := s.st
		s.mu.Unlock()
		if st != nil {
			if err := st.Close(); err != nil {
				errs = append(errs, fmt.Errorf("server: close store: %w", err))
			}
		}
		s.closeErr = errors.Join(errs...)
		s.log.Info("iggy server stopped")
	})
	return s.closeErr
}

// spawn runs fn in a goroutine counted by Close; it refuses (returns false) once Close
// has begun. It is the only place the server starts goroutines.
func (s *Server) spawn(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}

// ServeConn serves one already established client connection (for example one end of a
// net.Pipe, for in-process use) exactly like an accepted TCP connection, in a goroutine
// Close waits for. It takes ownership of nc. Errors: ErrClosed (nc is then closed).
func (s *Server) ServeConn(nc net.Conn) error {
	select {
	case <-s.ready:
	default:
		_ = nc.Close()
		return errors.New("server: not started")
	}
	c, err := s.addConn(nc)
	if err != nil {
		_ = nc.Close()
		return err
	}
	if !s.spawn(c.serve) {
		s.removeConn(c)
		_ = nc.Close()
		return ErrClosed
	}
	return nil
}

func (s *Server) acceptLoop() {
	backoff := 5 * time.Millisecond
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.quit:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.refusals.Warn("accept failed", "err", err)
			select {
			case <-time.After(backoff):
			case <-s.quit:
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		c, err := s.addConn(nc)
		if err != nil {
			s.refusals.Warn("connection refused", "remote", nc.RemoteAddr().String(), "err", err)
			_ = nc.Close()
			continue
		}
		if !s.spawn(c.serve) {
			s.removeConn(c)
			_ = nc.Close()
			return
		}
	}
}

var (
	errTooManyConnections = errors.New("server: too many connections (MaxConnections)")
	errTooManyFromIP      = errors.New("server: too many connections from this IP address (MaxConnectionsPerIP)")
)

func (s *Server) addConn(nc net.Conn) (*conn, error) {
	ip := remoteIP(nc)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, ErrClosed
	}
	if s.perIP[ip] >= s.cfg.MaxConnectionsPerIP {
		return nil, errTooManyFromIP
	}
	if len(s.conns) >= s.cfg.MaxConnections {
		// Make room by closing the oldest connection that has not logged in, so a
		// flood of idle unauthenticated connections cannot lock clients out.
		var victim *conn
		for c := range s.conns {
			if !c.loggedIn.Load() && (victim == nil || c.id < victim.id) {
				victim = c
			}
		}
		if victim == nil {
			return nil, errTooManyConnections
		}
		s.removeConnLocked(victim)
		victim.closeNow(errConnClosed)
		s.log.Debug("closed the oldest unauthenticated connection to make room", "conn", victim.id, "remote", victim.addr)
	}
	c := newConn(s, nc)
	c.ip = ip
	s.conns[c] = struct{}{}
	s.perIP[ip]++
	return c, nil
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	s.removeConnLocked(c)
	s.mu.Unlock()
}

func (s *Server) removeConnLocked(c *conn) {
	if _, ok := s.conns[c]; !ok {
		return
	}
	delete(s.conns, c)
	if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
		delete(s.perIP, c.ip)
	}
}

func (s *Server) connList() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// maintenanceLoop evicts stale consumer-group members and completes pending
// partition revocations whose timeout passed.
func (s *Server) maintenanceLoop() {
	tick := min(s.cfg.HeartbeatInterval, s.cfg.RebalancingTimeout) / 5
	tick = max(tick, 5*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case now := <-t.C:
			s.evictStale(now)
			s.groups.expireRevocations(now)
			s.refusals.flush()
		}
	}
}

// evictStale evicts every logged-in consumer-group member silent for more than 1.2 ×
// the heartbeat interval.
func (s *Server) evictStale(now time.Time) {
	limit := s.cfg.HeartbeatInterval * 12 / 10
	for _, c := range s.connList() {
		if now.Sub(time.Unix(0, c.lastSeen.Load())) <= limit {
			continue
		}
		sess := c.session()
		if sess == nil || !s.groups.isMember(sess.client) {
			continue
		}
		c.evictStale(sess)
	}
}
