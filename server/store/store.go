package store

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// FsyncPolicy says when writes reach stable storage.
type FsyncPolicy uint8

const (
	// FsyncAlways commits every acknowledged write with pebble.Sync before
	// the method returns. It is the default.
	FsyncAlways FsyncPolicy = iota
	// FsyncInterval commits with pebble.NoSync and syncs the write-ahead log
	// every Options.FsyncInterval and on Close. A crash may lose the writes
	// of the last interval, never part of one.
	FsyncInterval
)

// DefaultFsyncInterval is the interval used by FsyncInterval when
// Options.FsyncInterval is 0.
const DefaultFsyncInterval = 100 * time.Millisecond

// DefaultPasswordIterations is the PBKDF2-HMAC-SHA256 iteration count used
// when Options.PasswordIterations is 0 (OWASP's 2023 recommendation).
const DefaultPasswordIterations = 600_000

// Options configures Open. The zero value of every field but Dir is valid.
type Options struct {
	// Dir is the directory of the database; it is created if missing.
	// Required.
	Dir string
	// Fsync is the durability policy. Default FsyncAlways.
	Fsync FsyncPolicy
	// FsyncInterval is the sync period of FsyncInterval. Default
	// DefaultFsyncInterval.
	FsyncInterval time.Duration
	// FS is the file system; nil means the operating system's (vfs.Default).
	// Tests pass vfs.NewMem() or vfs.NewCrashableMem().
	FS vfs.FS
	// Logger receives Pebble's messages (info at Debug level) and the
	// store's own. Default slog.Default().
	Logger *slog.Logger
	// PasswordIterations is the PBKDF2 cost of new password hashes. Default
	// DefaultPasswordIterations; tests may lower it. Existing hashes keep
	// the cost they were made with.
	PasswordIterations int
	// DiskReserve is the size of the reserve file kept in the data directory and
	// deleted on the first ENOSPC, so the write in flight and Pebble's own work
	// still find room while the store turns to refusing writes (fault.go). Default
	// DefaultDiskReserve with the operating system's file system, none with
	// Options.FS; negative turns it off. When it does not fit, Open fails with a
	// *ReserveError (ErrNoRoomForReserve) on a directory without a database, and opens
	// an existing database read-only.
	DiskReserve int64
	// ProbeInterval is how often the data directory is checked to still exist and
	// be writable. Default DefaultProbeInterval with the operating system's file
	// system, none with Options.FS; negative turns it off.
	ProbeInterval time.Duration
	// Now is the clock that stamps batch timestamps. Default time.Now;
	// tests pass a fake one to make retention by message_expiry exact.
	Now func() time.Time
	// WriteFault is a hook for tests: a storage fault on demand. Nil (the default)
	// means none. When set, it is called before every write (appends, consumer
	// offsets, metadata, WAL syncs), concurrently; a non-nil error refuses that write
	// as a storage fault does (the error matches ErrStorageFault and wraps it), and
	// reads are served. Unlike a real fault it is not recorded: Fault stays nil, and
	// writes are accepted again as soon as the hook returns nil.
	WriteFault func() error
}

// Defaults of the storage-fault options.
const (
	DefaultDiskReserve   = 64 << 20
	DefaultProbeInterval = time.Second
)

// Store is an open database. All methods are safe for concurrent use.
//
// Lock order: Store.mu before partition.mu. Metadata changes hold mu
// exclusively (so no append, read or offset operation is in flight);
// partition operations hold mu shared plus the partition's own mutex.
type Store struct {
	db        *pebble.DB
	wo        *pebble.WriteOptions
	log       *slog.Logger
	iters     int
	now       func() time.Time
	dirLock   io.Closer
	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	dummyOnce sync.Once
	dummy     string // see dummyHash
	verified  verifiedPasswords
	dir       string
	reserve   int64
	readOnly  bool   // opened read-only: the disk was full at start
	baseFS    vfs.FS // the file system under vfs.OnDiskFull
	fault     faultState
	hookFault func() error // Options.WriteFault

	mu      sync.RWMutex
	closed  bool
	streams map[uint32]*streamState
	users   map[uint32]*userState
}

// Open opens (creating if needed) the database in opts.Dir and recovers all
// metadata and partition counters. It fails with ErrLocked if the directory
// is already open. The caller must Close the store.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("store: open: Options.Dir is empty")
	}
	if opts.Fsync != FsyncAlways && opts.Fsync != FsyncInterval {
		return nil, fmt.Errorf("store: open %s: unknown fsync policy %d", opts.Dir, opts.Fsync)
	}
	if opts.FsyncInterval <= 0 {
		opts.FsyncInterval = DefaultFsyncInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PasswordIterations <= 0 {
		opts.PasswordIterations = DefaultPasswordIterations
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{
		log:       opts.Logger.With("component", "store", "dir", opts.Dir),
		iters:     opts.PasswordIterations,
		now:       opts.Now,
		hookFault: opts.WriteFault,
		stop:      make(chan struct{}),
		streams:   map[uint32]*streamState{},
		users:     map[uint32]*userState{},
		wo:        pebble.Sync,
		dir:       opts.Dir,
		fault:     faultState{fatal: make(chan struct{})},
	}
	if opts.Fsync == FsyncInterval {
		s.wo = pebble.NoSync
	}
	fs, probe := opts.FS, opts.ProbeInterval
	var created createdPaths // what an Open that fails early removes again
	s.reserve = opts.DiskReserve
	if fs == nil {
		if s.reserve == 0 {
			s.reserve = DefaultDiskReserve
		}
		if probe == 0 {
			probe = DefaultProbeInterval
		}
		// Pebble's own LOCK uses fcntl locks, which do not exclude a second
		// open from the same process under another spelling of the path;
		// flock on a file of our own does.
		lockPath := filepath.Join(opts.Dir, lockName)
		created = recordCreated(opts.Dir, lockPath)
		if err := makePrivate(opts.Dir); err != nil {
			created.undo()
			return nil, fmt.Errorf("store: open %s: %w", opts.Dir, err)
		}
		l, err := lockDir(lockPath)
		if err != nil {
			created.undo()
			return nil, fmt.Errorf("store: open %s: %w (%w)", opts.Dir, ErrLocked, err)
		}
		s.dirLock = l
		fs = privateFS{vfs.Default}
	}
	s.baseFS = fs
	fs = vfs.OnDiskFull(fs, s.onDiskFull)
	po := pebbleOptions(fs, pebbleLogger{s})
	po.EventListener = &pebble.EventListener{BackgroundError: func(err error) {
		if isStorageError(err) {
			s.setFault(err, false)
		}
	}}
	if err := s.ensureBallast(); err != nil {
		re := &ReserveError{Dir: opts.Dir, Need: s.reserve, Err: err}
		re.Free, re.FreeKnown = freeBytes(opts.Dir)
		if desc, perr := pebble.Peek(opts.Dir, s.baseFS); perr != nil || !desc.Exists {
			// Nothing to serve read-only: fail, and leave nothing behind, so that the
			// next start is a first boot again.
			s.unlockDir()
			created.undo()
			return nil, fmt.Errorf("store: open %s: %w", opts.Dir, re)
		}
		// No room for the reserve under existing data: the disk is full (or
		// read-only). Open read-only, so the data can still be read; writes are
		// refused until a restart with room.
		s.log.Error("no room for the disk reserve; opening read-only", "err", re, "reserve", s.reserve)
		po.ReadOnly, s.readOnly = true, true
		s.setFault(fmt.Errorf("disk reserve at start: %w", re), false)
	}
	db, err := pebble.Open(opts.Dir, po)
	if err != nil {
		s.unlockDir()
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
			return nil, fmt.Errorf("store: open %s: %w (%w)", opts.Dir, ErrLocked, err)
		}
		return nil, fmt.Errorf("store: open %s: %w", opts.Dir, err)
	}
	s.db = db
	if err := s.load(); err != nil {
		_ = db.Close()
		s.unlockDir()
		return nil, fmt.Errorf("store: open %s: %w", opts.Dir, err)
	}
	if opts.Fsync == FsyncInterval && !s.readOnly {
		s.wg.Add(1)
		go s.syncLoop(opts.FsyncInterval)
	}
	if probe > 0 {
		if base, err := s.newProbeBase(); err == nil {
			s.wg.Add(1)
			go s.probeLoop(probe, base)
		}
	}
	return s, nil
}

func (s *Store) unlockDir() {
	if s.dirLock != nil {
		_ = s.dirLock.Close()
		s.dirLock = nil
	}
}

// syncLoop syncs the WAL every d until Close.
func (s *Store) syncLoop(d time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if s.Fault() != nil {
				continue // logged once by setFault
			}
			if err := s.syncWAL(); err != nil {
				s.log.Error("periodic WAL sync failed", "err", err)
			}
		}
	}
}

// Sync forces the write-ahead log to stable storage. It is only useful with
// FsyncInterval; with FsyncAlways every write is already synced.
func (s *Store) Sync() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.syncWAL(); err != nil {
		return fmt.Errorf("store: sync: %w", err)
	}
	return nil
}

// Close waits for operations in flight, syncs the log, stops the sync
// goroutine and closes the database. It is idempotent and safe on nil; later
// calls return the first call's result.
func (s *Store) Close() error {
	if s == nil {
		return nil
	}
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
		s.wg.Wait()
		var errs []error
		if s.fatalFault() {
			// Pebble stopped on a fatal error and holds its locks: closing it would
			// hang. What it acknowledged is in its log; the next open recovers it.
			s.unlockDir()
			s.closeErr = fmt.Errorf("store: close: not closed cleanly after a fatal storage fault: %w", s.Fault())
			return
		}
		if s.Fault() == nil {
			if err := s.syncWAL(); err != nil {
				errs = append(errs, fmt.Errorf("final sync: %w", err))
			}
		}
		if err := s.db.Close(); err != nil {
			errs = append(errs, err)
		}
		s.unlockDir()
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("store: close: %w", err)
		}
	})
	return s.closeErr
}

// commit commits b with the store's write options and closes it, also when a fault
// refuses the write before the commit starts (an unclosed batch keeps its buffer from
// Pebble's pool).
func (s *Store) commit(b *pebble.Batch, what string) error {
	// Whoever claims the batch first closes it: the commit when it runs, or this function
	// when the guard returned without running it (or before its goroutine started).
	var claimed atomic.Bool
	err := s.guarded(func() error {
		if !claimed.CompareAndSwap(false, true) {
			return errors.New("batch abandoned")
		}
		defer func() { _ = b.Close() }()
		return b.Commit(s.wo)
	})
	if claimed.CompareAndSwap(false, true) {
		_ = b.Close()
	}
	if err != nil {
		return fmt.Errorf("store: %s: commit: %w", what, err)
	}
	return nil
}

// pebbleLogger routes Pebble's log through slog.
type pebbleLogger struct{ s *Store }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.s.log.Debug(fmt.Sprintf(format, args...), "source", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	if p.s.Fault() != nil {
		return // a faulted store's retries would repeat the same error many times a second
	}
	p.s.log.Error(fmt.Sprintf(format, args...), "source", "pebble")
}

// Fatalf faults the store for good and parks the calling goroutine forever: Pebble
// cannot go on, and neither returning nor unwinding its stack is safe (fault.go).
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.s.setFault(fmt.Errorf("pebble: %s", fmt.Sprintf(format, args...)), true)
	select {}
}

func nowMicros() uint64 { return uint64(time.Now().UnixMicro()) }

// nowMicros reads the store's clock (Options.Now) in µs.
func (s *Store) nowMicros() uint64 { return uint64(max(s.now().UnixMicro(), 0)) }
