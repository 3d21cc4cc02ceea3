package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
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
	pipe     *sourcePipeline
	counters sourceCounters
	instance uint32
}

func newSourceRunner(cfg *config.Source, instance uint32, src sdk.Source, prods producers, stateDir string, log *slog.Logger) *sourceRunner {
	s := &sourceRunner{cfg: cfg, src: src, prods: prods, state: newStateFile(stateDir, cfg.Key), instance: instance}
	s.init("source", sourceShutdownTimeout, log.With("source", cfg.Key, "instance", instance))
	s.bench = newBenchLog(cfg.Benchmark, log)
	if n := len(cfg.Streams); n > 0 {
		s.stream = cfg.Streams[n-1]
	}
	return s
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
	if err := os.MkdirAll(filepath.Dir(s.state.path), 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	state, err := s.state.load()
	if err != nil {
		return err
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
	if s.cfg.OnFailure == config.FailureDeadLetter {
		dl := s.cfg.DeadLetter
		if s.dlq, err = s.prods.newProducer(ctx, producerConfig{Stream: dl.Stream, Topic: dl.Topic}); err != nil {
			closeProducers()
			return fmt.Errorf("dead-letter producer %s/%s: %w", dl.Stream, dl.Topic, err)
		}
	}
	env := sdk.SourceEnv{Key: s.cfg.Key, Config: s.cfg.PluginConfig, State: state, Logger: s.log}
	if err := callSafely(func() error { return s.src.Open(ctx, env) }); err != nil {
		closeProducers()
		return fmt.Errorf("open: %w", err)
	}
	s.prod = prod
	s.status.set(StateRunning)
	s.log.Info("source running", "stream", s.stream.Stream, "topic", s.stream.Topic, "schema", s.stream.Schema,
		"state_bytes", len(state))
	s.bench.enabled(KindSource, s.instance, s.cfg.Key)
	go s.run()
	return nil
}

func (s *sourceRunner) statusOf() Status {
	st, le := s.status.get()
	c := &s.counters
	return Status{Key: s.cfg.Key, Kind: KindSource, Name: s.cfg.Name, State: st, LastError: le,
		ID: s.instance, Enabled: s.cfg.Enabled, Version: s.cfg.Version, Path: s.cfg.Path,
		PluginVersion: pluginVersion(&s.cfg.Common, s.src), Source: s.cfg,
		Stats: Stats{Produced: c.produced.Load(), Sent: c.sent.Load(), SendErrors: c.sendErrors.Load(),
			Committed: c.acked.Load(), StoreErrors: c.stateErrs.Load(), FailedBatches: c.rejected.Load(),
			Retries: c.retries.Load(), Skipped: c.skipped.Load(), DeadLettered: c.deadLetter.Load(),
			DecodeErrors: c.encodeErrs.Load(), TransformErrors: c.transErrs.Load(),
			Stages: map[string]Histogram{StageIggySend: c.sendTime.snapshot(), StageStateSave: c.saveTime.snapshot(),
				StageTotal: c.batchTime.snapshot()}}}
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
	if cerr := callSafely(func() error { return s.src.Close(s.life.hard) }); cerr != nil {
		s.log.Warn("source close failed", "error", cerr)
	}
	if cerr := s.prod.close(s.life.hard); cerr != nil {
		s.log.Warn("producer close failed", "error", cerr)
	}
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

// loop runs until the stop or the end of input. It returns sdk.ErrEndOfInput, or nil on
// a stop.
func (s *sourceRunner) loop() error {
	soft := s.life.soft
	for soft.Err() == nil {
		var (
			batch sdk.SourceBatch
			ack   sdk.AckFunc
			end   error // the source's ErrEndOfInput: not retried
		)
		err := retry(soft, sourceBackoff, func(int) error {
			return callSafely(func() (err error) {
				batch, ack, err = s.src.Read(soft)
				if errors.Is(err, sdk.ErrEndOfInput) {
					end, err = err, nil
				}
				return err
			})
		}, func(attempt int, err error, wait time.Duration) {
			s.status.fail(fmt.Errorf("read: %w", err))
			s.log.Warn("source read failed; retrying", "error", err, "attempt", attempt, "backoff", wait)
		})
		switch {
		case end != nil:
			return end
		case soft.Err() != nil:
			return nil //nolint:nilerr // stopping (a read cut short by the stop is not a failure)
		case err != nil: // unreachable: reads are retried until the stop
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
func (s *sourceRunner) handle(batch sdk.SourceBatch, ack sdk.AckFunc) (bool, error) {
	start := time.Now()
	defer s.counters.batchTime.since(start)
	ev := sourceBatch{key: s.cfg.Key, stream: s.stream.Stream, topic: s.stream.Topic, size: len(batch.Messages), start: start}
	if s.bench != nil {
		defer func() { s.bench.source(ev) }()
	}
	n := uint64(len(batch.Messages))
	s.counters.produced.Add(n)
	msgs, bad := s.pipe.encode(batch)
	ev.prepare = time.Since(start)
	if len(bad) > 0 {
		if ok, stop := s.rejectMessages(batch, ack, bad); !ok || stop != nil {
			return ok, stop
		}
	}
	var err error
	if len(msgs) > 0 {
		sendStart := time.Now()
		err = s.send(msgs)
		ev.send = s.counters.sendTime.since(sendStart).Sub(sendStart)
		if err != nil && !errors.Is(err, errRejected) {
			s.ack(ack, fmt.Errorf("%w: %w", errStopping, err))
			return false, nil
		}
		if err == nil {
			s.counters.sent.Add(uint64(len(msgs)))
			ev.sent = len(msgs)
		}
	}
	if err != nil {
		if ok, stop := s.reject(sdk.SourceBatch{Messages: msgs, State: batch.State, Schema: batch.Schema}, ack, "send", err); !ok || stop != nil {
			return ok, stop
		}
	}
	if batch.State != nil {
		// The messages are in Iggy; a state that is not saved would replay them (duplicates,
		// never a skip), so saving is retried like a send.
		saveStart := time.Now()
		err := s.retry("save state", &s.counters.stateErrs, func() error { return s.state.save(batch.State) })
		ev.save = s.counters.saveTime.since(saveStart).Sub(saveStart)
		if err != nil {
			s.ack(ack, fmt.Errorf("%w: state not saved: %w", errStopping, err))
			return false, nil
		}
		ev.saved = true
	}
	s.ack(ack, nil)
	s.counters.acked.Add(n)
	return true, nil
}

// rejectMessages applies on_failure to the messages of a batch that could not be encoded
// or transformed, each alone: skip drops and counts them, dead_letter sends them (as
// produced, with ferry-error, ferry-stage = encode or transform, ferry-source) to the
// dead-letter topic; the rest of the batch goes on. stop rejects the whole batch as a
// failed send does (nacked, the source stops). ok and stop as reject's.
func (s *sourceRunner) rejectMessages(batch sdk.SourceBatch, ack sdk.AckFunc, bad []rejectedMessage) (ok bool, stop error) {
	for _, m := range bad {
		if m.stage == "transform" {
			s.counters.transErrs.Add(1)
		} else {
			s.counters.encodeErrs.Add(1)
		}
		s.log.Warn("source message rejected ("+m.stage+"); on_failure = "+string(s.cfg.OnFailure), "error", m.err)
	}
	switch s.cfg.OnFailure {
	case config.FailureSkip:
		s.counters.skipped.Add(uint64(len(bad)))
		return true, nil
	case config.FailureDeadLetter:
		out := make([]sdk.ProducedMessage, 0, len(bad))
		for _, m := range bad {
			out = append(out, sourceDeadLetters(s.cfg.Key, m.stage, []sdk.ProducedMessage{m.msg}, m.err)...)
		}
		if err := s.retry("dead-letter send", &s.counters.sendErrors, func() error { return s.dlq.send(s.life.hard, out) }); err != nil {
			s.ack(ack, fmt.Errorf("%w: %w", errStopping, err))
			return false, nil
		}
		s.counters.deadLetter.Add(uint64(len(bad)))
		return true, nil
	}
	return s.reject(batch, ack, bad[0].stage, bad[0].err)
}

// errRejected marks a send Iggy refused on every attempt.
var errRejected = errors.New("rejected by Iggy")

// send sends msgs: connection failures are retried until the stop; a send Iggy refuses
// (invalid input, too large) is retried [retry] max_retries times, then errRejected.
func (s *sourceRunner) send(msgs []sdk.ProducedMessage) error {
	refused := 0
	return s.retry("send", &s.counters.sendErrors, func() error {
		err := s.prod.send(s.life.hard, msgs)
		if err != nil && (errors.Is(err, wire.ErrInvalidInput) || errors.Is(err, wire.ErrLimitReached) || errors.Is(err, iggy.ErrTooLarge)) {
			if refused++; uint32(refused) > s.cfg.Retry.MaxRetries {
				return backoffStop{fmt.Errorf("%w: %w", errRejected, err)}
			}
		}
		return err
	})
}

// backoffStop ends a retry loop at once with its error.
type backoffStop struct{ err error }

func (b backoffStop) Error() string { return b.err.Error() }
func (b backoffStop) Unwrap() error { return b.err }

// reject applies on_failure to a rejected batch. ok is false when the runtime stopped
// first; stop is the error that stops the source (on_failure = stop).
func (s *sourceRunner) reject(batch sdk.SourceBatch, ack sdk.AckFunc, stage string, cause error) (ok bool, stop error) {
	n := uint64(len(batch.Messages))
	s.counters.rejected.Add(1)
	cause = fmt.Errorf("batch rejected (%s): %w", stage, cause)
	switch s.cfg.OnFailure {
	case config.FailureSkip:
		s.counters.skipped.Add(n)
		s.log.Warn("source batch rejected; skipped (on_failure = skip)", "error", cause, "messages", n)
		return true, nil
	case config.FailureDeadLetter:
		out := sourceDeadLetters(s.cfg.Key, stage, batch.Messages, cause)
		if err := s.retry("dead-letter send", &s.counters.sendErrors, func() error { return s.dlq.send(s.life.hard, out) }); err != nil {
			s.ack(ack, fmt.Errorf("%w: %w", errStopping, err))
			return false, nil
		}
		s.counters.deadLetter.Add(n)
		s.log.Warn("source batch rejected; sent to the dead-letter topic", "error", cause, "messages", n,
			"dead_letter", s.cfg.DeadLetter.Stream+"/"+s.cfg.DeadLetter.Topic)
		return true, nil
	default:
		s.log.Error("source batch rejected; stopping the source (on_failure = stop)", "error", cause, "messages", n)
		s.ack(ack, cause)
		return true, cause
	}
}

// sourceDeadLetters copies a rejected source batch for the dead-letter topic: payload and
// headers as the source produced them, plus ferry-error, ferry-stage and ferry-source.
func sourceDeadLetters(key, stage string, msgs []sdk.ProducedMessage, cause error) []sdk.ProducedMessage {
	errText := truncateUTF8(cause.Error(), maxHeaderValue)
	out := make([]sdk.ProducedMessage, len(msgs))
	for i, m := range msgs {
		hs := make([]sdk.Header, 0, len(m.Headers)+3)
		for _, h := range m.Headers {
			if h.Key.Kind == sdk.HeaderString && (isFerryHeader(string(h.Key.Value)) || string(h.Key.Value) == HeaderStage || string(h.Key.Value) == HeaderSource) {
				continue
			}
			hs = append(hs, h)
		}
		hs = append(hs, sdk.Header{Key: sdk.String(HeaderError), Value: sdk.String(errText)},
			sdk.Header{Key: sdk.String(HeaderStage), Value: sdk.String(stage)},
			sdk.Header{Key: sdk.String(HeaderSource), Value: sdk.String(key)})
		out[i] = sdk.ProducedMessage{ID: m.ID, Headers: hs, Payload: m.Payload}
	}
	return out
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
