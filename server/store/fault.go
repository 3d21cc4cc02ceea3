package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Storage faults (issue 14). A full disk, a read-only or vanished data directory
// must not take the process down: the store then refuses every write with an error
// matching ErrStorageFault (nothing of it reaches Pebble), keeps serving reads, logs
// once per change of state and reports the fault through Fault.
//
// Three mechanisms find a fault:
//   - the file system is wrapped with vfs.OnDiskFull: the first ENOSPC deletes the
//     ballast file (Options.DiskReserve bytes kept in the data directory), so the
//     write in flight and Pebble's background work still find room, and faults the
//     store;
//   - a probe (every Options.ProbeInterval) checks that the directory is still the
//     one opened and still writable, so a read-only remount, a chmod or a deletion is
//     found before Pebble trips over it;
//   - Pebble's own fatal errors (a commit or MANIFEST write that failed) fault the
//     store for good: Pebble cannot continue after them, and unwinding its stack
//     (panic or Goexit) runs deferred unlocks of mutexes it already released
//     ("sync: unlock of unlocked mutex", which no recover catches), so the goroutine
//     that hit it is parked for good instead. Commits run on a goroutine of their own
//     for that reason: a parked commit never parks a caller.

// ErrStorageFault is matched by the errors of writes refused because storage failed.
var ErrStorageFault = errors.New("store: storage fault: writes refused")

// FaultError is the error of a refused write: Cause is what failed.
type FaultError struct {
	Cause error
	Fatal bool // Pebble stopped: only a restart clears it
}

func (e *FaultError) Error() string {
	if e.Fatal {
		return fmt.Sprintf("%v (fatal, restart the server): %v", ErrStorageFault, e.Cause)
	}
	return fmt.Sprintf("%v: %v", ErrStorageFault, e.Cause)
}

// Is makes a FaultError match ErrStorageFault.
func (e *FaultError) Is(target error) bool { return target == ErrStorageFault }

func (e *FaultError) Unwrap() error { return e.Cause }

// faultState is the store's current fault (nil: healthy).
type faultState struct {
	mu    sync.Mutex
	err   *FaultError
	fatal chan struct{} // closed on the first fatal fault
}

// Fault returns the current storage fault (a *FaultError) or nil when writes are
// accepted.
func (s *Store) Fault() error {
	s.fault.mu.Lock()
	defer s.fault.mu.Unlock()
	if s.fault.err == nil {
		return nil
	}
	return s.fault.err
}

// setFault records cause as the store's fault, logging only a change of state.
func (s *Store) setFault(cause error, fatal bool) {
	s.fault.mu.Lock()
	defer s.fault.mu.Unlock()
	if old := s.fault.err; old != nil && (old.Fatal || !fatal) {
		return
	}
	s.fault.err = &FaultError{Cause: cause, Fatal: fatal}
	if fatal {
		close(s.fault.fatal)
	}
	s.log.Error("storage fault: refusing writes, serving reads", "err", cause, "fatal", fatal)
}

// clearFault ends a non-fatal fault once the probe finds storage healthy again.
func (s *Store) clearFault() {
	s.fault.mu.Lock()
	defer s.fault.mu.Unlock()
	if s.fault.err == nil || s.fault.err.Fatal || s.readOnly {
		return
	}
	s.fault.err = nil
	s.log.Warn("storage healthy again: accepting writes")
}

// fatalFault reports whether Pebble hit a fatal error.
func (s *Store) fatalFault() bool {
	select {
	case <-s.fault.fatal:
		return true
	default:
		return false
	}
}

// guarded runs fn (a Pebble write) on a goroutine of its own and returns its error,
// or the fault error at once if the store is faulted before or while it runs (see
// the comment at the top of this file).
func (s *Store) guarded(fn func() error) error {
	if err := s.Fault(); err != nil {
		return err
	}
	if s.hookFault != nil {
		if err := s.hookFault(); err != nil {
			return &FaultError{Cause: err}
		}
	}
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil && isStorageError(err) {
			s.setFault(err, false)
		}
		return err
	case <-s.fault.fatal:
		return s.Fault()
	}
}

// isStorageError reports whether err is the file system's, not the caller's.
func isStorageError(err error) bool {
	var pe *os.PathError
	var le *os.LinkError
	return errors.As(err, &pe) || errors.As(err, &le) || errors.Is(err, errDiskFull)
}

var errDiskFull = errors.New("no space left on device (the disk reserve was released)")

// ballastName is the disk reserve file of Options.DiskReserve.
const ballastName = "FERRY.RESERVE"

// lockName is the file the store holds a lock on from Open to Close (lockDir); the
// probe also checks it is still there.
const lockName = "FERRY.LOCK"

// ensureBallast creates the disk reserve if missing, writing its bytes so they are
// really allocated; an error means there is no room (or no write access).
func (s *Store) ensureBallast() error {
	if s.reserve <= 0 {
		return nil
	}
	p := filepath.Join(s.dir, ballastName)
	if fi, err := s.baseFS.Stat(p); err == nil && fi.Size() >= s.reserve {
		return nil
	}
	f, err := s.baseFS.Create(p, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	zero := make([]byte, min(s.reserve, 1<<20))
	for written := int64(0); written < s.reserve && err == nil; {
		var n int
		n, err = f.Write(zero[:min(int64(len(zero)), s.reserve-written)])
		written += int64(n)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = s.baseFS.Remove(p)
	}
	return err
}

// onDiskFull is vfs.OnDiskFull's callback: free the reserve, refuse writes.
func (s *Store) onDiskFull() {
	_ = s.baseFS.Remove(filepath.Join(s.dir, ballastName))
	s.setFault(errDiskFull, false)
}

// probeBase is what the probe compares the data directory with: the directory and
// the store's lock file as they were at Open (lock is nil where there is none).
type probeBase struct {
	dir, lock os.FileInfo
}

// newProbeBase reads the probe's base; it fails when the directory cannot be read.
func (s *Store) newProbeBase() (probeBase, error) {
	dir, err := os.Stat(s.dir)
	if err != nil {
		return probeBase{}, err
	}
	lock, _ := os.Stat(filepath.Join(s.dir, lockName)) // none off unix
	return probeBase{dir: dir, lock: lock}, nil
}

// probeLoop checks the data directory every d until Close.
func (s *Store) probeLoop(d time.Duration, opened probeBase) {
	defer s.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if err := s.probe(opened); err != nil {
			s.setFault(err, false)
			continue
		}
		if s.Fault() != nil && s.ensureBallast() == nil {
			s.clearFault()
		}
	}
}

// probe fails when the data directory is gone, replaced, emptied, or not writable.
// A directory whose files were deleted while it stayed (a "rm -rf" that lost the
// race with the probe's own file below, or "rm dir/*") is found by the lock file,
// which the store holds open from Open to Close: Pebble would go on creating files
// by path in it, and acknowledge writes that the next start cannot find.
//
// The write comes first and the identity checks after it, so a write that failed
// because the directory went away meanwhile is reported as the directory gone, not
// as a directory that is "not writable".
func (s *Store) probe(opened probeBase) error {
	werr := s.probeWrite()
	fi, err := os.Stat(s.dir)
	switch {
	case err != nil:
		return fmt.Errorf("data directory: %w", err)
	case !os.SameFile(fi, opened.dir):
		return fmt.Errorf("data directory %s was replaced (deleted and created again)", s.dir)
	}
	if opened.lock != nil {
		lock, err := os.Stat(filepath.Join(s.dir, lockName))
		if err != nil || !os.SameFile(lock, opened.lock) {
			return fmt.Errorf("data directory %s was emptied: its lock file %s is gone or replaced", s.dir, lockName)
		}
	}
	return werr
}

// probeWrite creates, writes and deletes a file in the data directory.
func (s *Store) probeWrite() error {
	p := filepath.Join(s.dir, "FERRY.PROBE")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("data directory not writable: %w", err)
	}
	_, err = f.Write([]byte{1})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(p); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("data directory not writable: %w", err)
	}
	return nil
}

// syncWAL syncs the write-ahead log through guarded.
func (s *Store) syncWAL() error {
	if s.readOnly {
		return nil
	}
	return s.guarded(func() error { return s.db.LogData(nil, pebble.Sync) })
}
