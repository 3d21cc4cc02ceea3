package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// TestSteer: what Consume returns for each kind of failure, as the runtime reads it: a
// lost connection asks for a reconnect, another transient failure for a wait, both
// uncounted; a row's refusal and a statement's error are returned as they are.
func TestSteer(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want sdk.Steering
	}{
		{"eof", fmt.Errorf("copy: %w", io.ErrUnexpectedEOF), sdk.SteerReconnect},
		{"admin_shutdown", &pgconn.PgError{Code: "57P01"}, sdk.SteerReconnect},
		{"connection_failure", &pgconn.PgError{Code: "08006"}, sdk.SteerReconnect},
		{"serialization", &pgconn.PgError{Code: "40001"}, sdk.SteerBackOff},
		{"out_of_memory", &pgconn.PgError{Code: "53200"}, sdk.SteerBackOff},
		{"unique_violation", &pgconn.PgError{Code: "23505"}, sdk.SteerRetry},
		{"undefined_table", &pgconn.PgError{Code: "42P01"}, sdk.SteerRetry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := steer(tc.err)
			if got, _ := sdk.SteeringOf(err); got != tc.want || !errors.Is(err, tc.err) {
				t.Fatalf("steer(%v) = %v, steering %v; want %v, wrapping the error", tc.err, err, got, tc.want)
			}
		})
	}
}

// TestLostConnectionSteeredToTheRuntime: PostgreSQL drops the sink's sessions and takes no
// new ones (its role's connection limit is 0): Consume returns at once an error wrapping
// sdk.ErrNotConnected, so the runtime reconnects without counting the failure toward
// max_retries; Reconnect fails until PostgreSQL takes connections again, then succeeds,
// and the batch delivered again is written once. Before, Consume retried inside until
// it succeeded or the sink stopped, and the runtime saw nothing.
func TestLostConnectionSteeredToTheRuntime(t *testing.T) {
	db, dbURL := testDB(t)
	tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
	role := "r_steered"
	drop := "DROP TABLE IF EXISTS " + tbl + ", " + off + "; DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = '" + role +
		"') THEN DROP OWNED BY " + role + "; END IF; END $$; DROP ROLE IF EXISTS " + role
	exec(t, db, drop)
	exec(t, db, "CREATE ROLE "+role+" LOGIN; GRANT ALL ON SCHEMA public TO "+role)
	t.Cleanup(func() { _, _ = db.Exec(context.Background(), drop) })
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	c := sdktest.NewCommitter()
	s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true}`, u.String(), tbl, off), "stop", c)
	if err := consume(t, s, 0, msgs(0, 10, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	exec(t, db, "ALTER ROLE "+role+" CONNECTION LIMIT 0")
	exec(t, db, "SELECT pg_terminate_backend(pid, 20000) FROM pg_stat_activity WHERE usename = $1", role)
	err = consume(t, s, 0, msgs(10, 10, jsonPayload))
	if !errors.Is(err, sdk.ErrNotConnected) {
		t.Fatalf("Consume with the sessions gone = %v; want an error wrapping sdk.ErrNotConnected", err)
	}
	if err := s.Reconnect(context.Background()); err == nil {
		t.Fatal("Reconnect succeeded while PostgreSQL takes no connection of the role")
	}
	exec(t, db, "ALTER ROLE "+role+" CONNECTION LIMIT -1")
	if err := s.Reconnect(context.Background()); err != nil {
		t.Fatalf("Reconnect: %v", err)
	}
	if err := consume(t, s, 0, msgs(10, 10, jsonPayload)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "SELECT count(DISTINCT iggy_offset) FROM "+tbl+" WHERE iggy_offset BETWEEN 0 AND 19"); n != 20 {
		t.Fatalf("distinct offsets = %d, want 20", n)
	}
	if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 20 {
		t.Fatalf("rows = %d, want 20", n)
	}
	if last := s.committed(0); last != 19 {
		t.Fatalf("last commit %d, want 19", last)
	}
}
