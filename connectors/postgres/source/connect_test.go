package source

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/syncbuf"
	"github.com/ferryio/ferry/sdk"
)

// TestConnectRetries: Open's connection is tried max_retries more times when it may pass
// (nothing listens: three attempts for max_retries 2, each retry logged once), and not
// at all again when the server refused the login (a database that does not exist), which
// no retry changes: Open fails at once although retry_delay is an hour. Before, every
// failure was retried, waiting retry_delay × attempt.
func TestConnectRetries(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	var logs syncbuf.Buffer
	s := New()
	cfg := fmt.Sprintf(`{"connection_string":"postgres://u@%s/db?connect_timeout=5","mode":"cdc","tables":["t"],"max_retries":2,"retry_delay":"1ms"}`, closed)
	err = s.Open(context.Background(), sdk.SourceEnv{Key: "pg", Config: []byte(cfg), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err == nil || !strings.Contains(err.Error(), "connect to PostgreSQL") {
		t.Fatalf("open with nothing listening: %v", err)
	}
	if n := strings.Count(logs.String(), "postgres source: connect failed; retrying"); n != 2 {
		t.Fatalf("%d retries logged, want 2:\n%s", n, logs.String())
	}

	_, dbURL := pgtest.Connect(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/no_such_database"
	var refused bytes.Buffer
	cfg = fmt.Sprintf(`{"connection_string":%q,"mode":"cdc","tables":["t"],"max_retries":3,"retry_delay":"1h"}`, u.String())
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = New().Open(ctx, sdk.SourceEnv{Key: "pg", Config: []byte(cfg), Logger: slog.New(slog.NewTextHandler(&refused, nil))})
	if err == nil || !strings.Contains(err.Error(), "3D000") || ctx.Err() != nil || strings.Contains(refused.String(), "retrying") {
		t.Fatalf("open of a database that does not exist: %v after %v; want SQLSTATE 3D000 at once\n%s", err, time.Since(start), refused.String())
	}
}
