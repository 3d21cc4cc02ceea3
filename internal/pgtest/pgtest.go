// Package pgtest connects tests to the throwaway PostgreSQL cluster of scripts/postgres.sh.
package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Connect returns a pool on FERRY_POSTGRES_URL and the URL, closed when the test ends. The
// test is skipped when the variable is unset (`eval "$(bash scripts/postgres.sh start)"`
// sets it; CI does) and fails when it is set but PostgreSQL does not answer.
func Connect(t testing.TB) (*pgxpool.Pool, string) {
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
