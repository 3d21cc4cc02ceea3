package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
	"go.opentelemetry.io/otel/trace"
)

// DefaultStateDir is the source state directory when the runtime config gives none.
const DefaultStateDir = "local_state"

// Source runner timings. Sources have no [retry] table upstream; these are fixed.
var (
	// sourceBackoff paces retries of a failed read, send or state save (never exhausted:
	// the batch is retried until it goes through or the runtime stops).
	sourceBackoff = Backoff{Initial: config.DefaultInitialBackoff, Max: config.DefaultMaxBackoff}
	// sourceShutdownTimeout bounds a source's whole stop: the send in flight, then Close.
	sourceShutdownTimeout = config.DefaultShutdownTimeout
	// ackTimeout bounds one AckFunc call.
	ackTimeout = 5 * time.Second
)

// sourceCounters are a source's running totals (atomic).
type sourceCounters struct {
	produced   atomic.Uint64 // messages read from the source
	sent       atomic.Uint64 // messages Iggy confirmed
	acked      atomic.Uint64 // messages of batches whose state was saved and acked
	sendErrors atomic.Uint64 // failed send attempts (each is retried)
	stateErrs  atomic.Uint64 // failed state saves (each is retried)
	rejected   atomic.Uint64 // batches rejected for good (conversion, or refused by Iggy after retries)
	encodeErrs atomic.Uint64 // messages that could not be encoded to the stream's schema
	transErrs  atomic.Uint64 // messages a transform failed on
	retries    atomic.Uint64 // send and state-save attempts after the first
	skipped    atomic.Uint64 // messages of rejected batches dropped (on_failure = skip)
	deadLetter atomic.Uint64 // messages of rejected batches sent to the dead-letter topic
	startErrs  atomic.Uint64 // starts that failed (open, plugin not found, ...)
	sendTime   stageHistogram
	saveTime   stageHistogram
	batchTime  stageHistogram
}

// sourceRunner runs one source connector: one goroutine reads a batch, sends it, saves its
// state, acks it, and only then reads the next (one batch in flight).
//
// Its lifecycle (timeout sourceShutdownTimeout): the soft stop interrupts Read and retry
// waits; the hard stop interrupts the send in flight. A batch not confirmed by then is
// acked with an error (the source may produce it again); a confirmed one is saved and
// acked before the runner stops.
type sourceRunner struct {
	runner
	cfg      *config.Source
	stream   config.SourceStream
	src      sdk.Source
	prods    producers
	state    *stateFile
	prod     producer
	dlq      producer // on_failure = dead_letter
	failure  *failurePolicy
	pipe     *sourcePipeline
	counters *sourceCounters // the slot's: they outlive the instance (restarts never reset them)
	inFlight int             // batches read and not yet acked at most (sourceInFlight)
	instance uint32
	tracer   trace.Tracer // a span per batch (tracing.go); nil when traces are off
	routes   sourceRoutes // producers of the other targets the source routes messages to
}

// newSourceRunner builds a source runner counting into counters (nil: counters of its own).
func newSourceRunner(cfg *config.Source, instance uint32, src sdk.Source, prods producers, stateDir string, counters *sourceCounters, log *slog.Logger) *sourceRunner {
	if counters == nil {
		counters = new(sourceCounters)
	}
	s := &sourceRunner{cfg: cfg, src: src, prods: prods, state: newStateFile(stateDir, cfg.Key), instance: instance, counters: counters}
	s.init(KindSource, cfg.Key, cfg.Name, sourceShutdownTimeout, &counters.startErrs, log.With("source", cfg.Key, "instance", instance))
	s.bench = newBenchLog(cfg.Benchmark, log)
	s.failure = sourceFailurePolicy(cfg, s.counters, func(err error) {
		s.counters.sendErrors.Add(1)
		s.status.fail(fmt.Errorf("dead-letter send: %w", err))
	}, s.log)
	if n := len(cfg.Streams); n > 0 {
		s.stream = cfg.Streams[n-1]
	}
	return s
}

func (s *sourceRunner) begin(ctx context.Context) {
	if s.src != nil {
		_ = s.start(ctx) // a failure is logged and kept in the status by failStart
	}
}

// start loads the state, opens the source and the producer and starts the loop. On error
// everything opened is closed, the status is error and the runner is stopped.
func (s *sourceRunner) start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			s.failStart(err)
		}
	}()
	if len(s.cfg.Streams) == 0 {
		return errors.New("no [[streams]] entry")
	}
	if len(s.cfg.Streams) > 1 {
		s.log.Warn("source has several [[streams]] entries; only the last is used, as upstream",
			"entries", len(s.cfg.Streams), "stream", s.stream.Stream, "topic", s.stream.Topic)
	}
	if s.prods == nil {
		return errors.New("this runtime has no Iggy producer")
	}
	chain, err := buildChain(s.cfg.Transforms)
	if err != nil {
		return fmt.Errorf("%w: %w", errPermanent, err)
	}
	avro, err := avroSchemaText(s.stream.Schema, s.stream.AvroSchemaJSON, s.stream.AvroSchemaPath)
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.stream.Stream, err)
	}
	if s.pipe, err = newSourcePipeline(s.stream.Schema, avro, chain); err != nil {
		return fmt.Errorf("%w: stream %s: %w", errPermanent, s.stream.Stream, err)
	}
	state, err := s.state.load()
	if err != nil {
		return stateLoadError(err)
	}
	prod, err := s.prods.newProducer(ctx, producerConfig{Stream: s.stream.Stream, Topic: s.stream.Topic,
		BatchLength: s.stream.BatchLength, Linger: s.stream.LingerTime})
	if err != nil {
		return fmt.Errorf("producer %s/%s: %w", s.stream.Stream, s.stream.Topic, err)
	}
	closeProducers := func() {
		cctx, cancel := context.WithTimeout(context.Background(), sourceShutdownTimeout)
		defer cancel()
		_ = prod.close(cctx)
		if s.dlq != nil {
			_ = s.dlq.close(cctx)
		}
	}
	if dl, ok := s.failure.deadLetterTopic(s.cfg.DeadLetter); ok {
		if s.dlq, err = s.prods.newProducer(ctx, producerConfig{Stream: dl.Stream, Topic: dl.Topic}); err != nil {
			closeProducers()
			return fmt.Errorf("dead-letter producer %s/%s: %w", dl.Stream, dl.Topic, err)
		}
		s.failure.dlq = s.dlq
	}
	env := sdk.SourceEnv{Key: s.cfg.Key, Config: s.cfg.PluginConfig, State: state, Logger: s.log, Tail: prod.tail, TailN: prod.tailN}
	if err := callSafely(func() error { return s.src.Open(ctx, env) }); err != nil {
		s.logOpenFailed(err)
		closeProducers()
		return fmt.Errorf("open: %w", err)
	}
	if s.inFlight, err = sourceInFlight(s.cfg, s.src, s.log); err != nil {
		if cerr := callSafely(func() error { return s.src.Close(s.life.hard) }); cerr != nil {
			s.log.Warn("source close failed", "error", cerr)
		}
		closeProducers()
		return err
	}
	if c, ok := s.src.(sdk.CheckedPayloads); ok && c.CheckedPayloads() {
		s.pipe.checked = true
	}
	s.prod = prod
	s.status.started()
	s.log.Info("source running", "stream", s.stream.Stream, "topic", s.stream.Topic, "schema", s.stream.Schema,
		"state_bytes", len(state), "max_in_flight", s.inFlight)
	s.logInitialized(s.instance)
	s.log.Info(sourceStartedLine(s.instance))
	s.bench.enabled(KindSource, s.instance, s.cfg.Key)
	go s.run()
	return nil
}

func (s *sourceRunner) statusOf() Status {
	st, le := s.status.get()
	c := s.counters
	out := Status{Key: s.cfg.Key, Kind: KindSource, Name: s.cfg.Name, State: st, LastError: le,
		ID: s.instance, Enabled: s.cfg.Enabled, Version: s.cfg.Version, Path: s.cfg.Path,
		PluginVersion: pluginVersion(&s.cfg.Common, s.src), Source: s.cfg,
		Stats: Stats{Produced: c.produced.Load(), Sent: c.sent.Load(), SendErrors: c.sendErrors.Load(),
			Committed: c.acked.Load(), StoreErrors: c.stateErrs.Load(), FailedBatches: c.rejected.Load(),
			Retries: c.retries.Load(), Skipped: c.skipped.Load(), DeadLettered: c.deadLetter.Load(),
			DecodeErrors: c.encodeErrs.Load(), TransformErrors: c.transErrs.Load(), StartErrors: c.startErrs.Load(),
			Stages: map[string]Histogram{StageIggySend: c.sendTime.snapshot(), StageStateSave: c.saveTime.snapshot(),
				StageTotal: c.batchTime.snapshot()}}}
	if st != StateStarting { // a source's own figures only once it is open
		out.Gauges = gaugesOf(s.src)
	}
	return out
}

// gaugesOf returns a connector's own figures (sdk.Gauger); a panic in it gives none.
func gaugesOf(c any) (out []sdk.Gauge) {
	g, ok := c.(sdk.Gauger)
	if !ok {
		return nil
	}
	defer func() {
		if recover() != nil {
			out = nil
		}
	}()
	return g.Gauges()
}

// run is the forwarding loop, then the shutdown: close the source, then the producer,
// within what is left of the stop's timeout.
func (s *sourceRunner) run() {
	defer s.life.Finish()
	err := s.loop()
	if st, _ := s.status.get(); st != StateError {
		s.status.set(StateStopping)
	}
	s.life.Stop() // the end of input stops the source too; bounds Close below
	s.log.Info(sourceStoppedLine(s.instance))
	s.logClosing(s.instance)
	if cerr := callSafely(func() error { return s.src.Close(s.life.hard) }); cerr != nil {
		s.log.Warn("source close failed", "error", cerr)
	}
	s.logClosed(s.instance)
	if cerr := s.prod.close(s.life.hard); cerr != nil {
		s.log.Warn("producer close failed", "error", cerr)
	}
	s.routes.close(s.life.hard, s.log)
	if s.dlq != nil {
		if cerr := s.dlq.close(s.life.hard); cerr != nil {
			s.log.Warn("dead-letter producer close failed", "error", cerr)
		}
	}
	switch {
	case errors.Is(err, sdk.ErrEndOfInput):
		// A clean end: status stopped even after earlier (recovered) errors.
		s.status.set(StateStopped)
		s.log.Info("source reached end of input", "sent", s.counters.sent.Load())
	case err != nil:
		s.status.fail(err)
		s.log.Error("source stopped", "error", err)
	default:
		s.status.stopped()
		s.log.Info("source stopped", "sent", s.counters.sent.Load())
	}
}

// errStopping is the ack error of a batch that was not (fully) handled when the runtime
// stopped.
var errStopping = errors.New("connect: runtime stopping; batch not delivered")

// sourceInFlight is how many batches a source runner may hold read and not yet acked: the
// connector's max_in_flight (unset: config.DefaultMaxInFlight for a source that accepts
// reads ahead, 1 for any other), at most what the source accepts (sdk.PipelinedSource). A
// source that does not accept it refuses max_in_flight > 1 (a restart cannot fix that).
func sourceInFlight(cfg *config.Source, src sdk.Source, log *slog.Logger) (int, error) {
	ps, ok := src.(sdk.PipelinedSource)
	return inFlightLimit(cfg.MaxInFlight, "source", ok, ok, func() int { return ps.MaxUnacked() },
		fmt.Sprintf("the source %s does not accept reads before its batches are acknowledged (sdk.PipelinedSource)", cfg.Path), log)
}

// loop runs until the stop or the end of input. It returns sdk.ErrEndOfInput, or nil on
// a stop.
func (s *sourceRunner) loop() error {
	if s.inFlight > 1 {
		return s.pipelined(s.inFlight)
	}
	soft := s.life.soft
	for soft.Err() == nil {
		var (
			batch sdk.SourceBatch
			ack   sdk.AckFunc
			end   error // the source's ErrEndOfInput: not retried
		)
		err := s.read(soft, &batch, &ack)
		if errors.Is(err, sdk.ErrEndOfInput) {
			end, err = err, nil
		}
		switch {
		case end != nil:
			return end
		case soft.Err() != nil:
			return nil //nolint:nilerr // stopping (a read cut short by the stop is not a failure)
		case err != nil: // a permanent error: the source stops with it
			return err
		}
		if ack == nil {
			ack = sdk.NoAck
		}
		if ok, err := s.handle(batch, ack); err != nil {
			return err
		} else if !ok {
			return nil
		}
	}
	return nil
}

// read calls Read until it returns a batch, the end of input, a permanent error (the
// source stops with it) or the stop: sdk.Retry steered by the source's errors (a
// BackOffError waits what it asks, ErrNotConnected reconnects, anything else waits
// sourceBackoff); reads are retried until the stop.
func (s *sourceRunner) read(soft context.Context, batch *sdk.SourceBatch, ack *sdk.AckFunc) error {
	r := sourceBackoff.Retry()
	r.What, r.Log, r.Reconnector = "source read", s.log, reconnectorOf(s.src)
	var end error
	err := r.Do(soft, func(ctx context.Context, _ int) error {
		err := callSafely(func() (err error) {
			*batch, *ack, err = s.src.Read(ctx)
			return err
		})
		if err == nil {
			return nil
		}
		if errors.Is(err, sdk.ErrEndOfInput) || soft.Err() != nil {
			end = err
			return nil //nolint:nilerr // ends the retries; end carries the error out
		}
		s.status.fail(fmt.Errorf("read: %w", err))
		return err
	})
	switch {
	case end != nil:
		return end
	case err == nil, soft.Err() != nil:
		return nil //nolint:nilerr // read, or the stop ended a wait: reading ends quietly
	}
	return fmt.Errorf("read: %w", err)
}

// handle sends, saves and acks one batch. It returns false when the runtime stopped
// before the batch was done (the batch was then acked with an error), and an error when
// a rejected batch stops the source (on_failure = stop).
//
// A batch is rejected when its payloads cannot be encoded to the stream's schema, or
// when Iggy refuses the send itself (invalid input, too large) on every one of the
// [retry] attempts; connection failures are retried until the stop. A rejected batch
// is handled as on_failure says: stop (nacked; the source is stopped, and restarted by
// its [restart] policy), skip (dropped and counted; its state is saved and it is acked,
// so the source moves past it) or dead_letter (its messages, as produced, go to the
// dead-letter topic with the ferry-error and ferry-stage headers; then as skip).
func (s *sourceRunner) handle(batch sdk.SourceBatch, ack sdk.AckFunc) (ok bool, stop error) {
	p := s.prepare(batch, ack)
	s.sendPending(p)
	return s.finish(p)
}

// pendingBatch is one batch between its Read and its ack: prepare fills it on the reading
// goroutine, sendPending sends it, finish saves its state and acks it (in read order).
type pendingBatch struct {
	batch sdk.SourceBatch
	ack   sdk.AckFunc
	msgs  []sdk.ProducedMessage // encoded, to send
	start time.Time
	ev    sourceBatch
	st    *sourceTrace
	// The batch's fate before its state is saved; at most one is set.
	unsent   error  // not delivered: the runtime stopped, or an earlier batch was not delivered
	badStage string // on_failure = stop and a message failed encode or a transform:
	badErr   error  // the whole batch is rejected unsent
	rejected error  // Iggy refused the send on every attempt (errRejected)
}

// blocksLater reports whether the batches read after p must not be sent: p left a gap that
// on_failure does not allow the source to move past.
func (p *pendingBatch) blocksLater(f *failurePolicy) bool {
	return p.unsent != nil || p.badErr != nil || (p.rejected != nil && f.stops())
}

// prepare counts and encodes a batch just read; messages that failed encode or a transform,
// and those Iggy can never accept (takeUnsendable), are handled as on_failure says
// (rejectMessages).
func (s *sourceRunner) prepare(batch sdk.SourceBatch, ack sdk.AckFunc) *pendingBatch {
	p := &pendingBatch{batch: batch, ack: ack, start: time.Now()}
	if s.tracer != nil {
		p.st = s.startSourceTrace(p.start, len(batch.Messages))
	}
	p.ev = sourceBatch{key: s.cfg.Key, stream: s.stream.Stream, topic: s.stream.Topic, size: len(batch.Messages), start: p.start}
	s.counters.produced.Add(uint64(len(batch.Messages)))
	msgs, bad := s.pipe.encode(batch)
	msgs, over := takeUnsendable(msgs)
	bad = append(bad, over...)
	p.ev.prepare = time.Since(p.start)
	p.msgs = msgs
	if len(bad) > 0 {
		s.rejectMessages(p, bad)
	}
	return p
}

// beforeSourceSend, set only by tests, is called with each batch's messages before they are
// sent (to hold a send until the test saw what it waits for).
var beforeSourceSend func(msgs []sdk.ProducedMessage)

// sendPending sends p's messages unless its fate is already decided.
func (s *sourceRunner) sendPending(p *pendingBatch) { s.sendBatches([]*pendingBatch{p}, false) }

// toSend reports whether p still has messages to send.
func (p *pendingBatch) toSend() bool { return p.unsent == nil && p.badErr == nil && len(p.msgs) > 0 }

// sendBatches sends the messages of ps, batches read one after another that each have
// some to send, as one send (read order kept), and records the outcome in each: one round
// trip to Iggy for them all. A send Iggy refuses cannot say whose message it refused: each
// batch is then sent alone (after reading the partitions back, for a source with unique
// ids), so that on_failure applies to the batch it belongs to. failed: as sendAfter's.
func (s *sourceRunner) sendBatches(ps []*pendingBatch, failed bool) {
	if len(ps) == 0 || !ps[0].toSend() {
		return
	}
	msgs := ps[0].msgs
	if len(ps) > 1 {
		n := 0
		for _, p := range ps {
			n += len(p.msgs)
		}
		msgs = make([]sdk.ProducedMessage, 0, n)
		for _, p := range ps {
			msgs = append(msgs, p.msgs...)
		}
	}
	if beforeSourceSend != nil {
		beforeSourceSend(msgs)
	}
	sendStart := time.Now()
	spans := make([]trace.Span, len(ps))
	for i, p := range ps {
		spans[i] = p.st.startSend(sendStart, len(p.msgs))
	}
	err := s.sendAfter(msgs, failed)
	for i, p := range ps {
		p.st.endSend(spans[i], err)
	}
	took := s.counters.sendTime.since(sendStart).Sub(sendStart)
	for range ps[1:] { // the send stage's histogram counts batches
		s.counters.sendTime.observe(took)
	}
	switch {
	case err == nil:
		s.counters.sent.Add(uint64(len(msgs)))
		for _, p := range ps {
			p.ev.send, p.ev.sent = took, len(p.msgs)
		}
	case errors.Is(err, errRejected) && len(ps) > 1:
		// Each partition holds a prefix of what was sent to it, so sending the batches
		// again one by one, in order, stopping at one that leaves a gap, never puts a
		// later batch's message after an earlier one's that is missing.
		for i, p := range ps {
			s.sendBatches(ps[i:i+1], true)
			if p.blocksLater(s.failure) {
				for _, q := range ps[i+1:] {
					q.unsent = fmt.Errorf("%w: %w", errEarlierUndelivered, errors.Join(p.unsent, p.rejected))
				}
				break
			}
		}
	case errors.Is(err, errRejected):
		ps[0].ev.send, ps[0].rejected = took, err
	default:
		for _, p := range ps {
			p.ev.send, p.unsent = took, err
		}
	}
}

// finish ends a batch: a batch not delivered is nacked (false), a rejected one handled as
// on_failure says, then the state is saved and the batch acked. ok and stop as handle's.
func (s *sourceRunner) finish(p *pendingBatch) (ok bool, stop error) {
	defer s.counters.batchTime.since(p.start)
	if p.st != nil {
		defer func() { p.st.end(ok, stop) }()
	}
	if s.bench != nil {
		defer func() { s.bench.source(p.ev) }()
	}
	switch {
	case p.unsent != nil:
		s.ack(p.ack, fmt.Errorf("%w: %w", errStopping, p.unsent))
		return false, nil
	case p.badErr != nil:
		return s.reject(p.batch, p.ack, p.badStage, p.badErr)
	case p.rejected != nil:
		batch := sdk.SourceBatch{Messages: p.msgs, State: p.batch.State, Schema: p.batch.Schema}
		if ok, stop := s.reject(batch, p.ack, "send", p.rejected); !ok || stop != nil {
			return ok, stop
		}
	}
	if p.batch.State != nil {
		// The messages are in Iggy; a state that is not saved would replay them (duplicates,
		// never a skip), so saving is retried like a send.
		saveStart := time.Now()
		err := s.retry("save state", &s.counters.stateErrs, func() error { return s.state.save(p.batch.State) })
		p.ev.save = s.counters.saveTime.since(saveStart).Sub(saveStart)
		if err != nil {
			s.ack(p.ack, fmt.Errorf("%w: state not saved: %w", errStopping, err))
			return false, nil
		}
		p.ev.saved = true
	}
	s.ack(p.ack, nil)
	s.counters.acked.Add(uint64(len(p.batch.Messages)))
	if p.rejected == nil {
		// Delivered: an error status left by failed reads or sends (retried, or a batch
		// skipped or dead-lettered before this one) no longer says what the source does.
		s.status.working()
	}
	return true, nil
}

// rejectMessages applies on_failure to the messages of a batch that could not be encoded
// or transformed, or that Iggy can never accept, each alone: skip drops and counts them,
// dead_letter sends them (as produced, with ferry-error, ferry-stage = encode, transform or
// send, ferry-source) to the dead-letter topic; the rest of the batch goes on. stop rejects
// the whole batch as a failed send does (finish nacks it, the source stops). A source that
// describes its messages (sdk.MessageDescriber) has each named in the error.
func (s *sourceRunner) rejectMessages(p *pendingBatch, bad []rejectedMessage) {
	for i := range bad {
		m := &bad[i]
		switch m.stage {
		case "transform":
			s.counters.transErrs.Add(1)
		case "send":
			s.counters.sendErrors.Add(1)
		default:
			s.counters.encodeErrs.Add(1)
		}
		if d := s.describe(&m.msg); d != "" {
			m.err = fmt.Errorf("%s: %w", d, m.err)
		}
		s.log.Warn("source message rejected ("+m.stage+"); on_failure = "+s.failure.String(), "error", m.err)
	}
	if s.failure.stops() {
		p.badStage, p.badErr = bad[0].stage, bad[0].err
		return
	}
	if _, ok := s.failure.deadLetterTopic(s.cfg.DeadLetter); ok {
		bad = s.skipEmpty(bad)
		if len(bad) == 0 {
			return
		}
	}
	msgs := make([]sdk.ProducedMessage, len(bad))
	each := make([]messageFailure, len(bad))
	for i, m := range bad {
		msgs[i], each[i] = m.msg, messageFailure{m.stage, m.err}
	}
	f := sourceFailure(fmt.Sprintf("%d source message(s) rejected", len(bad)), bad[0].stage, bad[0].err, s.cfg.Key, msgs)
	f.each = each
	if v, err := s.failure.apply(s.life.hard, f); v == unsent {
		p.unsent = err
	}
}

// skipEmpty returns bad without the messages refused for an empty payload, which it skips
// and counts: no dead letter can carry one (Iggy stores no message without payload, and
// its send would be retried until the stop).
func (s *sourceRunner) skipEmpty(bad []rejectedMessage) []rejectedMessage {
	keep := bad[:0:0]
	for _, m := range bad {
		if !errors.Is(m.err, errEmptyPayload) {
			keep = append(keep, m)
			continue
		}
		s.counters.skipped.Add(1)
		s.log.Warn("source message without payload; skipped, as no dead letter can hold it (on_failure = dead_letter)", "error", m.err)
	}
	return keep
}

// describe is the source's description of m (sdk.MessageDescriber), or "" (none, or it
// panicked).
func (s *sourceRunner) describe(m *sdk.ProducedMessage) (d string) {
	ds, ok := s.src.(sdk.MessageDescriber)
	if !ok {
		return ""
	}
	if err := callSafely(func() error { d = ds.DescribeMessage(m); return nil }); err != nil {
		return ""
	}
	return d
}

// errRejected marks a send Iggy refused on every attempt.
var errRejected = errors.New("rejected by Iggy")

// sendAfter sends msgs: connection failures are retried until the stop; a send Iggy
// refuses (invalid input, too large) is retried [retry] max_retries times, then
// errRejected.
//
// For a source with unique ids (sdk.UniqueIDs) a retry first reads the partitions' last
// messages and leaves out what the failed attempt already stored, so an attempt whose
// outcome was unknown appends nothing twice. failed says an earlier attempt for these
// messages already failed, so that even the first attempt here reads back first.
//
// Messages the source routed to other targets (sdk.ProducedMessage.Stream, Topic) go in
// one send per target, in read order within each; a target's send that went through is
// not sent again when another's is retried. A target that does not exist is refused like
// an invalid message.
func (s *sourceRunner) sendAfter(msgs []sdk.ProducedMessage, failed bool) error {
	refused := 0
	u, ok := s.src.(sdk.UniqueIDs)
	unique := ok && u.UniqueIDs()
	groups := s.byTarget(msgs)
	done := make([]bool, len(groups))
	prods := make([]producer, len(groups))
	return s.retry("send", &s.counters.sendErrors, func() error {
		refuse := func(err error) error {
			var missing *missingTopicError
			if errors.Is(err, wire.ErrInvalidInput) || errors.Is(err, wire.ErrLimitReached) || errors.Is(err, iggy.ErrTooLarge) || errors.As(err, &missing) {
				if refused++; uint32(refused) > s.cfg.Retry.MaxRetries {
					return backoffStop{fmt.Errorf("%w: %w", errRejected, err)}
				}
			}
			return err
		}
		// Every target's producer first: a missing target refuses the batch before any
		// of it is sent.
		for i, g := range groups {
			if prods[i] != nil {
				continue
			}
			if !g.routed {
				prods[i] = s.prod
				continue
			}
			p, err := s.routes.get(s.life.hard, s.prods, g.target, s.stream, s.log)
			if err != nil {
				return refuse(err)
			}
			prods[i] = p
		}
		for i, g := range groups {
			if done[i] {
				continue
			}
			err := s.sendTo(prods[i], g, unique && failed)
			failed = failed || err != nil
			if err != nil {
				return refuse(err)
			}
			done[i] = true
		}
		return nil
	})
}

// sendTo sends one target's messages with prod; readBack first leaves out what an earlier
// attempt already stored (a source with unique ids).
func (s *sourceRunner) sendTo(prod producer, g targetMessages, readBack bool) error {
	out := g.msgs
	if readBack {
		t, err := prod.tail(s.life.hard)
		if err != nil {
			return fmt.Errorf("read back before a retry: %w", err)
		}
		if out = notStored(g.msgs, t); len(out) == 0 {
			return nil
		}
	}
	if err := prod.send(s.life.hard, out); err != nil {
		if g.routed {
			return fmt.Errorf("to %s/%s: %w", g.target.stream, g.target.topic, err)
		}
		return err
	}
	return nil
}

// notStored returns msgs without the keyed messages (a partition key or an explicit
// partition) already stored: per partition, those up to and including the one whose id is
// the partition's last message. Ids are unique, so a match can only be a message of this
// batch that an earlier attempt appended.
func notStored(msgs []sdk.ProducedMessage, t sdk.Tail) []sdk.ProducedMessage {
	upTo := make(map[int]int) // partition index -> index in msgs of its stored last message
	for i := range msgs {
		p, ok := tailIndex(&msgs[i], t)
		if ok && t.Last[p] != nil && t.Last[p].ID == msgs[i].ID {
			upTo[p] = i
		}
	}
	if len(upTo) == 0 {
		return msgs
	}
	out := make([]sdk.ProducedMessage, 0, len(msgs))
	for i := range msgs {
		if p, ok := tailIndex(&msgs[i], t); ok {
			if last, held := upTo[p]; held && i <= last {
				continue
			}
		}
		out = append(out, msgs[i])
	}
	return out
}

// tailIndex returns the index in t.Last of the partition m goes to, when m names it (an
// explicit partition or a partition key).
func tailIndex(m *sdk.ProducedMessage, t sdk.Tail) (int, bool) {
	if len(t.Last) == 0 {
		return 0, false
	}
	switch {
	case m.Partition != nil:
		return int(*m.Partition % uint32(len(t.Last))), true
	case len(m.PartitionKey) > 0 && t.PartitionOf != nil:
		p := t.PartitionOf(m.PartitionKey)
		return p, p >= 0 && p < len(t.Last)
	}
	return 0, false
}

// backoffStop ends a retry loop at once with its error.
type backoffStop struct{ err error }

func (b backoffStop) Error() string { return b.err.Error() }
func (b backoffStop) Unwrap() error { return b.err }

// reject applies on_failure to a rejected batch. ok is false when the runtime stopped
// first; stop is the error that stops the source (on_failure = stop).
func (s *sourceRunner) reject(batch sdk.SourceBatch, ack sdk.AckFunc, stage string, cause error) (ok bool, stop error) {
	s.counters.rejected.Add(1)
	cause = fmt.Errorf("batch rejected (%s): %w", stage, cause)
	switch v, err := s.failure.apply(s.life.hard, sourceFailure("source batch rejected", stage, cause, s.cfg.Key, batch.Messages)); v {
	case unsent:
		s.ack(ack, fmt.Errorf("%w: %w", errStopping, err))
		return false, nil
	case mustStop:
		s.ack(ack, err)
		return true, err
	}
	return true, nil
}

// retry runs op until it succeeds, waiting sourceBackoff between attempts: the batch in
// hand is finished even after the soft stop (op sees the hard-stop context), but once
// the soft stop began a failure is not retried. It returns op's last error then. An op
// error of type backoffStop ends the loop at once.
func (s *sourceRunner) retry(what string, errs *atomic.Uint64, op func() error) error {
	var final error
	err := retry(s.life.soft, sourceBackoff, func(attempt int) error {
		if attempt > 1 {
			s.counters.retries.Add(1)
		}
		err := op()
		switch {
		case err == nil && attempt > 1:
			s.status.set(StateRunning)
			s.log.Info(what+" succeeded after retries", "attempts", attempt)
		case err != nil && s.life.hard.Err() == nil:
			errs.Add(1)
			s.status.fail(fmt.Errorf("%s: %w", what, err))
		}
		if bs := (backoffStop{}); errors.As(err, &bs) {
			final = bs.err
			return nil //nolint:nilerr // ends the retries; final carries the error out
		}
		return err
	}, func(attempt int, err error, wait time.Duration) {
		s.log.Warn(what+" failed; retrying", "error", err, "attempt", attempt, "backoff", wait)
	})
	if final != nil {
		return final
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// ack calls the batch's AckFunc once; its error is logged (a native G4 plugin refuses a
// result after its own timeout).
func (s *sourceRunner) ack(ack sdk.AckFunc, result error) {
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	if err := callSafely(func() error { return ack(ctx, result) }); err != nil {
		s.log.Warn("source ack failed", "error", err, "nack", result != nil)
	}
}
