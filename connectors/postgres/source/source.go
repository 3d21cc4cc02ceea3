package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ferryio/ferry/sdk"
)

// Source is the PostgreSQL source: CDC, or polling. Open, Read and Close are called by one
// goroutine (the runtime's source runner); the replication stream runs on a goroutine of its
// own; Gauges may be called from any.
type Source struct {
	cfg  config
	log  *slog.Logger
	ctrl *pgx.Conn // setup, checks and the read-back at open; polling's queries
	st   *stream
	poll *poller // polling mode

	stop    context.CancelFunc
	nacked  atomic.Bool
	lastPos atomic.Pointer[position]
	closeMu sync.Mutex
	gaugeMu sync.RWMutex // guards st for Gauges, which any goroutine may call
}

// New returns an unopened source.
func New() *Source { return &Source{} }

// UniqueIDs reports that, in CDC mode, every change has its own deterministic message id
// (its position), so the runtime may drop what a failed send already stored. Polling mode's
// ids are random.
func (s *Source) UniqueIDs() bool { return s.cfg.Mode == modeCDC }

// MaxUnacked is how many batches the runtime may hold read and not yet acknowledged
// (sdk.PipelinedSource), asked after Open. In CDC mode any number: Read only takes changes
// off the stream's queue, the acks (in read order) each move the slot's confirmed position
// up to their own batch, and a nack stops the source (the next Read fails) so a restart
// replays from the slot. Polling mode takes one batch at a time: its delete or mark after
// read follows each ack.
func (s *Source) MaxUnacked() int {
	if s.cfg.Mode == modeCDC {
		return sdk.MaxConcurrentUnlimited
	}
	return 1
}

// CheckedPayloads reports that, in CDC mode, every payload is valid JSON (sdk.CheckedPayloads):
// the record is written by hand around column values that are JSON by construction
// (integers and numbers checked, strings escaped, json and jsonb compacted, which parses
// them), so the runtime need not parse each one again. Polling mode's payload_column may
// carry anything: checked.
func (s *Source) CheckedPayloads() bool { return s.cfg.Mode == modeCDC }

// state is what the runtime saves after Iggy acknowledged a batch: the position of its
// last change.
type state struct {
	Position position `json:"position"`
}

// Open checks the server, creates the publication and the slot when missing, reads back
// what Iggy already holds and starts streaming. ctx bounds the setup only. A missing
// setting or right is a permanent error naming the SQL that fixes it.
func (s *Source) Open(ctx context.Context, env sdk.SourceEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("postgres source %s: %w", env.Key, err))
	}
	s.cfg, s.log = cfg, env.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.ctrl, err = s.connect(ctx); err != nil {
		return err
	}
	if s.cfg.Mode == modePolling {
		if s.poll, err = newPoller(&s.cfg, s.ctrl, env.State); err != nil {
			s.closeCtrl(ctx)
			return sdk.Permanent(fmt.Errorf("postgres source %s: %w", env.Key, err))
		}
		return nil
	}
	if errs := checkSetup(ctx, s.ctrl, &s.cfg); len(errs) > 0 {
		s.closeCtrl(ctx)
		return sdk.Permanent(errors.Join(errs...))
	}
	pks, err := primaryKeys(ctx, s.ctrl, s.cfg.Tables)
	if err != nil {
		s.closeCtrl(ctx)
		return err
	}
	if created, err := ensurePublication(ctx, s.ctrl, &s.cfg); err != nil {
		s.closeCtrl(ctx)
		return err
	} else if created {
		s.log.Info("postgres source: publication created", "publication", s.cfg.Publication, "tables", s.cfg.Tables)
	}
	confirmed, created, err := ensureSlot(ctx, s.ctrl, &s.cfg)
	if err != nil {
		s.closeCtrl(ctx)
		var se *SetupError
		if errors.As(err, &se) {
			return sdk.Permanent(err)
		}
		return err
	}
	if created {
		s.log.Info("postgres source: replication slot created", "slot", s.cfg.ReplicationSlot)
	}
	var saved state
	if len(env.State) > 0 {
		if err := json.Unmarshal(env.State, &saved); err != nil {
			s.closeCtrl(ctx)
			return sdk.Permanent(fmt.Errorf("postgres source %s: saved state %q: %w", env.Key, env.State, err))
		}
	}
	skip, sent, err := s.alreadySent(ctx, env, saved.Position)
	if err != nil {
		s.closeCtrl(ctx)
		return err
	}
	// The gauges start from what is known at open, not 0: the last change Iggy holds (or
	// the slot's confirmed position when none is known: every change before it was sent),
	// and the server's WAL end, until the stream reports newer figures.
	if sent.LSN == 0 {
		sent = position{LSN: confirmed}
	}
	s.lastPos.Store(&sent)
	var walEnd pglogrepl.LSN
	if err := s.ctrl.QueryRow(ctx, "SELECT pg_current_wal_lsn()").Scan(&walEnd); err != nil {
		s.closeCtrl(ctx)
		return fmt.Errorf("read the server's WAL position: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	st := &stream{cfg: &s.cfg, log: s.log, dec: newDecoder(&s.cfg, pks), out: make(chan item, 2*s.cfg.BatchSize),
		skip: skip, high: saved.Position, flushed: confirmed, done: make(chan struct{})}
	st.reported.Store(confirmed)
	st.serverEnd.Store(uint64(walEnd))
	s.gaugeMu.Lock()
	s.st = st
	s.gaugeMu.Unlock()
	go st.run(sctx)
	return nil
}

// connect opens the control connection, retrying a failure max_retries times when it may
// pass (the server is unreachable, starting or short of connections; not a login it
// refused), waiting retry_delay, then twice that each time, up to 30s.
func (s *Source) connect(ctx context.Context) (*pgx.Conn, error) {
	var c *pgx.Conn
	r := sdk.Retry{Initial: s.cfg.RetryDelay, Max: maxBackoff, Attempts: s.cfg.MaxRetries + 1, Transient: mayPass,
		What: "postgres source: connect", Log: s.log}
	err := r.Do(ctx, func(ctx context.Context, _ int) (err error) {
		c, err = pgx.Connect(ctx, s.cfg.ConnectionString.Reveal())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return c, nil
}

// maxBackoff caps the waits between connection attempts.
const maxBackoff = 30 * time.Second

// mayPass reports whether a failed connection may work when tried again: anything but
// the server's refusal of this login (a password, a database, a right), which no retry
// changes; a server starting, stopping or out of connections (classes 53, 57) may pass.
func mayPass(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return true
	}
	return strings.HasPrefix(pe.Code, "53") || strings.HasPrefix(pe.Code, "57") || strings.HasPrefix(pe.Code, "08")
}

// alreadySent returns the test for changes Iggy already holds: at or below the saved
// position, or at or below the newest change of this slot that the partition the change
// goes to holds (sent before a crash whose state save never happened). What Iggy holds is
// read back once, here (sdk.ReadBack: each partition's last message; the slot is one
// lane, and each partition holds its changes in commit order).
func (s *Source) alreadySent(ctx context.Context, env sdk.SourceEnv, saved position) (skip func(*change) bool, sent position, err error) {
	upTo := func(c *change) bool { return !c.pos.after(saved) }
	if env.Tail == nil {
		return upTo, saved, nil
	}
	var walEnd pglogrepl.LSN
	if err := s.ctrl.QueryRow(ctx, "SELECT pg_current_wal_lsn()").Scan(&walEnd); err != nil {
		return nil, position{}, fmt.Errorf("read the server's WAL position: %w", err)
	}
	var foreign error // a change past this server's WAL end
	held, err := sdk.ReadBack(ctx, env, 1, func(m sdk.SentMessage) (sdk.Origin[position], bool) {
		p, ok := positionOf(m.Headers, s.cfg.ReplicationSlot)
		if ok && p.LSN > uint64(walEnd) && foreign == nil {
			// Skipping up to it would skip this server's changes until its WAL got there:
			// the topic was written from another cluster (a restored or new database under
			// the same slot name).
			foreign = sdk.Permanent(fmt.Errorf("partition %d offset %d holds a change at %s, past this server's WAL end %s: the topic was written from another database; use a new topic or replication_slot",
				m.Partition, m.Offset, p, walEnd))
		}
		return sdk.Origin[position]{Pos: p}, ok
	}, func(a, b position) bool { return b.after(a) })
	switch {
	case err != nil:
		return nil, position{}, err
	case foreign != nil:
		return nil, position{}, foreign
	}
	newest, ok := held.Newest("")
	if !ok || !newest.after(saved) {
		return upTo, saved, nil
	}
	s.log.Info("postgres source: Iggy holds changes past the saved state; skipping them", "newest", newest.String(), "saved", saved.String())
	return func(c *change) bool {
		// Past the newest change any partition holds: not held (the bulk of a stream).
		return upTo(c) || !c.pos.after(newest) && held.HoldsKeyed(c.key, "", c.pos)
	}, newest, nil
}

// Read returns the next changes, at most batch_size, waiting for the first one. A batch
// may hold only transaction ends (no messages): acknowledging it lets the slot advance.
func (s *Source) Read(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	if s.poll != nil {
		return s.poll.read(ctx)
	}
	if s.nacked.Load() {
		return sdk.SourceBatch{}, nil, sdk.Permanent(errors.New("postgres source: a batch was not delivered; restart to replay from the slot"))
	}
	var first item
	select {
	case first = <-s.st.out:
	case <-s.st.done:
		if e := s.st.err.Load(); e != nil {
			return sdk.SourceBatch{}, nil, sdk.Permanent(*e)
		}
		return sdk.SourceBatch{}, nil, errors.New("postgres source: change stream ended")
	case <-ctx.Done():
		return sdk.SourceBatch{}, nil, ctx.Err()
	}
	// Sized for what is queued now (the loop below takes no more than that).
	batch := sdk.SourceBatch{Schema: sdk.SchemaJSON, Messages: make([]sdk.ProducedMessage, 0, min(s.cfg.BatchSize, len(s.st.out)+1))}
	var lastSeq, lastEnd uint64
	var lastPos *position
	add := func(it item) error {
		lastSeq = it.seq
		if it.change == nil {
			lastEnd = it.commitEnd
			return nil
		}
		m, err := it.change.message()
		if err != nil {
			return err
		}
		batch.Messages = append(batch.Messages, m)
		p := it.change.pos
		lastPos = &p
		return nil
	}
	if err := add(first); err != nil {
		return sdk.SourceBatch{}, nil, sdk.Permanent(err)
	}
more:
	for len(batch.Messages) < s.cfg.BatchSize {
		select {
		case it := <-s.st.out:
			if err := add(it); err != nil {
				return sdk.SourceBatch{}, nil, sdk.Permanent(err)
			}
		default:
			break more
		}
	}
	if lastPos != nil {
		batch.State, _ = json.Marshal(state{Position: *lastPos})
	}
	n := uint64(len(batch.Messages))
	if s.cfg.VerboseLogging {
		s.log.Info("postgres source: changes read", "messages", n)
	} else {
		s.log.Debug("postgres source: changes read", "messages", n)
	}
	ack := func(_ context.Context, err error) error {
		if err != nil {
			s.nacked.Store(true) // the next Read stops the source: a restart replays from the slot
			return nil           //nolint:nilerr // a nack is recorded, not a failed ack
		}
		if lastEnd > 0 {
			s.st.ackedEnd.Store(lastEnd)
		}
		s.st.acked.Store(lastSeq)
		if lastPos != nil {
			s.lastPos.Store(lastPos)
		}
		return nil
	}
	return batch, ack, nil
}

// Gauges reports the slot's lag behind the server's WAL in bytes (what PostgreSQL must
// keep for this source), the commit LSN of the last change Iggy acknowledged and the
// position last confirmed to PostgreSQL. nil before Open.
func (s *Source) Gauges() []sdk.Gauge {
	s.gaugeMu.RLock()
	st := s.st
	s.gaugeMu.RUnlock()
	if st == nil {
		return nil
	}
	confirmed, end := st.reported.Load(), st.serverEnd.Load()
	var lastLSN uint64
	if p := s.lastPos.Load(); p != nil {
		lastLSN = p.LSN
	}
	return []sdk.Gauge{
		{Name: "pg_slot_lag_bytes", Help: "WAL bytes between the server's end and the slot's confirmed position", Value: end - min(end, confirmed)},
		{Name: "pg_last_sent_lsn", Help: "commit LSN of the last change Iggy acknowledged", Value: lastLSN},
		{Name: "pg_confirmed_flush_lsn", Help: "the position last confirmed to PostgreSQL", Value: confirmed},
	}
}

// Close stops the stream and closes the connections. ctx bounds the wait.
func (s *Source) Close(ctx context.Context) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.stop != nil {
		s.stop()
		select {
		case <-s.st.done:
		case <-ctx.Done():
			return fmt.Errorf("postgres source: close: %w", ctx.Err())
		}
		s.stop = nil
	}
	s.closeCtrl(ctx)
	return nil
}

func (s *Source) closeCtrl(ctx context.Context) {
	if s.ctrl != nil {
		_ = s.ctrl.Close(ctx)
		s.ctrl = nil
	}
}

// Preflight checks, without creating anything, what Open needs: wal_level = logical, the
// REPLICATION right, each table's replica identity, and that an existing slot of that name
// uses pgoutput. Each error carries the SQL that fixes it.
func (s *Source) Preflight(ctx context.Context, config []byte) []error {
	cfg, err := Config.Parse(config)
	if err != nil {
		return []error{err}
	}
	conn, err := pgx.Connect(ctx, cfg.ConnectionString.Reveal())
	if err != nil {
		return []error{fmt.Errorf("connect to PostgreSQL: %w", err)}
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if cfg.Mode == modePolling {
		return nil
	}
	errs := checkSetup(ctx, conn, &cfg)
	var plugin string
	err = conn.QueryRow(ctx, "SELECT coalesce(plugin, '') FROM pg_replication_slots WHERE slot_name = $1", cfg.ReplicationSlot).Scan(&plugin)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		errs = append(errs, fmt.Errorf("look up replication slot %s: %w", cfg.ReplicationSlot, err))
	case plugin != "pgoutput":
		errs = append(errs, &SetupError{
			Problem: fmt.Sprintf("replication_slot: slot %s exists with plugin %q; this source reads pgoutput", cfg.ReplicationSlot, plugin),
			Fix:     fmt.Sprintf("SELECT pg_drop_replication_slot('%s'); or set replication_slot to another name", escapeLiteral(cfg.ReplicationSlot))})
	}
	return errs
}
