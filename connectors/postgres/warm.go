package postgres

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// warmBallast is the size of the parameter WarmBackend sends. The backend reads the
// message into a buffer that doubles up to 4 MiB; glibc serves it with mmap and, when it
// is freed, raises its trim threshold to twice that size: 8 MiB, about ten times what a
// COPY of 1000 rows takes.
const warmBallast = 3 << 20

// warmSQL names itself, so the statement is recognisable in pg_stat_activity.
const warmSQL = "SELECT octet_length($1::bytea) /* ferry: warm_backends */"

// WarmBackend runs once on each new connection, before the pool hands it out (pgxpool's
// AfterConnect; exported so that the benchmark's bare COPY loop warms its connections the
// same way). A PostgreSQL backend on glibc otherwise gives the heap memory a COPY used
// back to the kernel when the statement ends, 8 KiB at a time, and takes it again for the
// next COPY, faulting every page in anew: about 90 brk calls and 170 page faults for a
// COPY of 1000 rows, and in the benchmark 1 µs of PostgreSQL's CPU a row in the binary
// format (docs/postgres.md). glibc keeps free heap below twice the largest mmapped block
// it has freed, so one large message is enough for the connection's life. The statement
// reads nothing and changes nothing; a server without glibc only receives 3 MiB once.
func WarmBackend(ctx context.Context, conn *pgx.Conn) error {
	// The parameter goes in binary: pgx's text form of a bytea would be twice as long and
	// cost the sink a hex encoding.
	res := conn.PgConn().ExecParams(ctx, warmSQL, [][]byte{make([]byte, warmBallast)},
		[]uint32{pgtype.ByteaOID}, []int16{pgtype.BinaryFormatCode}, []int16{pgtype.BinaryFormatCode}).Read()
	if res.Err != nil {
		return fmt.Errorf("warm the connection's backend (warm_backends): %w", res.Err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 || len(res.Rows[0][0]) != 4 {
		return fmt.Errorf("warm the connection's backend (warm_backends): unexpected answer %v", res.Rows)
	}
	if n := binary.BigEndian.Uint32(res.Rows[0][0]); n != warmBallast {
		return fmt.Errorf("warm the connection's backend (warm_backends): the server read %d bytes of %d", n, warmBallast)
	}
	return nil
}
