// Package pgtest connects tests to the throwaway PostgreSQL cluster of scripts/postgres.sh
// and holds the fixtures their PostgreSQL tests share (DropSlot). It does not import
// package testing (its TB is the part of TB it uses), so the conformance suite,
// which ships in the ferry binary, can use its fixtures too.
package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TB is the part of TB this package uses.
type TB interface {
	Helper()
	Skip(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Connect returns a pool on FERRY_POSTGRES_URL and the URL, closed when the test ends. The
// test is skipped when the variable is unset (`eval "$(bash scripts/postgres.sh start)"`
// sets it; CI does) and fails when it is set but PostgreSQL does not answer. The test holds
// off restarts of the cluster (HoldRestarts) before it connects: `go test ./...` runs the
// packages at the same time, and tests/e2e restarts the cluster.
func Connect(t TB) (*pgxpool.Pool, string) {
	t.Helper()
	if os.Getenv("FERRY_POSTGRES_URL") != "" {
		HoldRestarts(t)
	}
	return ConnectRestarting(t)
}

// ConnectRestarting is Connect for the package whose tests restart the cluster
// (tests/e2e): it takes no lock, as its restarts take the lock exclusively.
func ConnectRestarting(t TB) (*pgxpool.Pool, string) {
	t.Helper()
	url := os.Getenv("FERRY_POSTGRES_URL")
	if url == "" {
		t.Skip("FERRY_POSTGRES_URL is not set: run `eval \"$(bash scripts/postgres.sh start)\"` for the PostgreSQL tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		t.Fatalf("FERRY_POSTGRES_URL is set but PostgreSQL is unreachable: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, url
}

// HoldRestarts keeps the cluster of scripts/postgres.sh (FERRY_POSTGRES_DIR) from being
// restarted until the test ends: it holds the restart lock shared; a restart (LockRestarts)
// takes it exclusively. Without FERRY_POSTGRES_DIR there is nothing to hold.
func HoldRestarts(t TB) {
	t.Helper()
	f := openRestartLock(t)
	if f == nil {
		return
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatalf("restart lock: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
}

// LockRestarts waits until no other test holds off restarts and returns the function that
// ends the exclusive hold, to call once the cluster answers again.
func LockRestarts(t TB) (unlock func()) {
	t.Helper()
	f := openRestartLock(t)
	if f == nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("restart lock: %v", err)
	}
	return func() { _ = f.Close() }
}

func openRestartLock(t TB) *os.File {
	dir := os.Getenv("FERRY_POSTGRES_DIR")
	if dir == "" {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, "restart.lock"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatalf("restart lock: %v", err)
	}
	return f
}
