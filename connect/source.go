package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// SourcePluginLoader opens the native source plugin library at path (already resolved with
// config.ResolvePluginPath) and returns a factory of source instances over it. cmd/ferry
// wires it to connect/plugin, so this package needs no cgo.
type SourcePluginLoader func(path string) (sdk.SourceFactory, error)

// DefaultStateDir is the source state directory when the runtime config gives none.
const DefaultStateDir = "local_state"

// Source runner timings. Sources have no [retry] table upstream; these are fixed.
var (
	// sourceBackoff paces retries of a failed send or state save (never exhausted: the
	// batch is retried until it goes through or the runtime stops).
	sourceBackoff = Backoff{Initial: config.DefaultInitialBackoff, Max: config.DefaultMaxBackoff}
	// sourceShutdownTimeout bounds the in-flight send at a graceful stop, and Close.
	sourceShutdownTimeout = config.DefaultShutdownTimeout
	// ackTimeout bounds one AckFunc call.
	ackTimeout = 5 * time.Second
)

// sourceBackend is what a source runner needs of Iggy: a producer on its stream/topic.
// iggy_backend's adapter implements it over *iggy.Client.
type sourceBackend interface {
	// newSourceProducer returns a producer on stream/topic, creating the stream and the
	// topic (one partition) when missing, as upstream.
	newSourceProducer(ctx context.Context, cfg sourceProducerConfig) (sourceProducer, error)
}

type sourceProducerConfig struct {
	Stream, Topic string
	BatchLength   uint32
	Linger        time.Duration
}

// sourceProducer sends one batch and returns once Iggy confirmed every message.
type sourceProducer interface {
	send(ctx context.Context, msgs []sdk.ProducedMessage) error
	close(ctx context.Context) error
}

// sourceDeps is what Runtime needs to run sources; [New] fills it.
type sourceDeps struct {
	be       sourceBackend
	stateDir string // "" = DefaultStateDir
	load     SourcePluginLoader
}

// sourceCounters are a source's running totals (atomic).
type sourceCounters struct {
	produced   atomic.Uint64 // messages read from the source
	sent       atomic.Uint64 // messages Iggy confirmed
	acked      atomic.Uint64 // messages of batches whose state was saved and acked
	sendErrors atomic.Uint64 // failed send attempts (each is retried)
	stateErrs  atomic.Uint64 // failed state saves (each is retried)
	rejected   atomic.Uint64 // batches refused before sending (payload conversion)
}

// sourceRunner runs one source connector: one goroutine reads a batch, sends it, saves its
// state, acks it, and only then reads the next (one batch in flight).
//
// Contexts: stopCtx ends on the graceful stop and interrupts Read and retry waits; hardCtx
// ends on the hard stop (or sourceShutdownTimeout after the graceful one) and interrupts the
// send in flight. A batch not confirmed by then is acked with an error (the source may
// produce it again); a confirmed one is saved and acked before the runner stops.
type sourceRunner struct {
	cfg      *config.Source
	stream   config.SourceStream
	src      sdk.Source
	deps     sourceDeps
	state    *stateFile
	prod     sourceProducer
	log      *slog.Logger
	counters sourceCounters
	status   statusCell

	stopCtx    context.Context
	cancelStop context.CancelFunc
	hardCtx    context.Context
	cancelHard context.CancelFunc
	done       chan struct{}
}

func newSourceRunner(cfg *config.Source, instance uint32, src sdk.Source, deps sourceDeps, log *slog.Logger) *sourceRunner {
	s := &sourceRunner{cfg: cfg, src: src, deps: deps, done: make(chan struct{}),
		log: log.With("source", cfg.Key, "instance", instance)}
	if n := len(cfg.Streams); n > 0 {
		s.stream = cfg.Streams[n-1]
	}
	dir := deps.stateDir
	if dir == "" {
		dir = DefaultStateDir
	}
	s.state = newStateFile(dir, cfg.Key)
	s.hardCtx, s.cancelHard = context.WithCancel(context.Background())
	s.stopCtx, s.cancelStop = context.WithCancel(s.hardCtx)
	s.status.set(StateStarting)
	return s
}

// startSources starts every enabled source; called by Runtime.Start before the sinks, as
// upstream (a source creates its stream and topic, which a sink may consume).
func (r *Runtime) startSources(ctx context.Context) []connector {
	var out []connector
	for _, cfg := range r.conns.Sources {
		if !cfg.Enabled {
			continue
		}
		out = append(out, r.startSource(ctx, cfg))
	}
	return out
}

func (r *Runtime) startSource(ctx context.Context, cfg *config.Source) *sourceRunner {
	id := r.nextID.Add(1)
	factory, err := r.sourceFactory(cfg)
	if err != nil {
		s := newSourceRunner(cfg, id, nil, r.sources, r.log)
		s.failStart(err)
		return s
	}
	s := newSourceRunner(cfg, id, factory(), r.sources, r.log)
	_ = s.start(ctx) // a failure is logged and kept in the status by failStart
	return s
}

func (r *Runtime) sourceFactory(cfg *config.Source) (sdk.SourceFactory, error) {
	if name, ok := cfg.Builtin(); ok {
		f, ok := r.builtins.Source(name)
		if !ok {
			return nil, fmt.Errorf("unknown built-in source %q (known: %v)", name, r.builtins.SourceNames())
		}
		return f, nil
	}
	if r.sources.load == nil {
		return nil, fmt.Errorf("native plugin %s: this runtime has no plugin loader", cfg.Path)
	}
	path, err := config.ResolvePluginPath(cfg.Path, nil)
	if err != nil {
		return nil, err
	}
	f, err := r.sources.load(path)
	if err != nil {
		return nil, fmt.Errorf("load plugin %s: %w", path, err)
	}
	return f, nil
}

// failStart records a start failure; the runner is then done.
func (s *sourceRunner) failStart(err error) {
	s.status.fail(err)
	s.log.Error("source not started", "error", err)
	s.cancelHard()
	close(s.done)
}

// start loads the state, opens the source and the producer and starts the loop. On error
// everything opened is closed, the status is error and the runner is done.
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
	if s.deps.be == nil {
		return errors.New("this runtime has no Iggy producer")
	}
	if err := os.MkdirAll(s.stateDirPath(), 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	state, err := s.state.load()
	if err != nil {
		return err
	}
	prod, err := s.deps.be.newSourceProducer(ctx, sourceProducerConfig{Stream: s.stream.Stream, Topic: s.stream.Topic,
		BatchLength: s.stream.BatchLength, Linger: s.stream.LingerTime})
	if err != nil {
		return fmt.Errorf("producer %s/%s: %w", s.stream.Stream, s.stream.Topic, err)
	}
	env := sdk.SourceEnv{Key: s.cfg.Key, Config: s.cfg.PluginConfig, State: state, Logger: s.log}
	if err := recoverCall(func() error { return s.src.Open(ctx, env) }); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), sourceShutdownTimeout)
		defer cancel()
		_ = prod.close(cctx)
		return fmt.Errorf("open: %w", err)
	}
	s.prod = prod
	s.status.set(StateRunning)
	s.log.Info("source running", "stream", s.stream.Stream, "topic", s.stream.Topic, "schema", s.stream.Schema,
		"state_bytes", len(state))
	go s.run()
	return nil
}

func (s *sourceRunner) stateDirPath() string {
	if s.deps.stateDir == "" {
		return DefaultStateDir
	}
	return s.deps.stateDir
}

// requestStop begins the graceful stop; idempotent. The in-flight send gets
// sourceShutdownTimeout to finish.
func (s *sourceRunner) requestStop() {
	s.cancelStop()
}

// abandon interrupts the send in flight; its batch is acked with an error.
func (s *sourceRunner) abandon() { s.cancelHard() }

func (s *sourceRunner) doneCh() <-chan struct{} { return s.done }

func (s *sourceRunner) statusOf() Status {
	st, le := s.status.get()
	c := &s.counters
	return Status{Key: s.cfg.Key, Kind: "source", Name: s.cfg.Name, State: st, LastError: le,
		Stats: Stats{Produced: c.produced.Load(), Sent: c.sent.Load(), SendErrors: c.sendErrors.Load(),
			Committed: c.acked.Load(), StoreErrors: c.stateErrs.Load(), FailedBatches: c.rejected.Load()}}
}

// run is the forwarding loop, then the shutdown: close the source, then the producer.
func (s *sourceRunner) run() {
	defer close(s.done)
	defer s.cancelHard()
	// After a graceful stop the in-flight send gets sourceShutdownTimeout.
	stopTimer := context.AfterFunc(s.stopCtx, func() {
		t := time.NewTimer(sourceShutdownTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			s.log.Warn("in-flight batch not confirmed within the shutdown timeout; abandoning it")
			s.cancelHard()
		case <-s.done:
		}
	})
	defer stopTimer()
	err := s.loop()
	if st, _ := s.status.get(); st != StateError {
		s.status.set(StateStopping)
	}
	cctx, cancel := context.WithTimeout(context.Background(), sourceShutdownTimeout)
	defer cancel()
	if cerr := recoverCall(func() error { return s.src.Close(cctx) }); cerr != nil {
		s.log.Warn("source close failed", "error", cerr)
	}
	if cerr := s.prod.close(cctx); cerr != nil {
		s.log.Warn("producer close failed", "error", cerr)
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
	for failures := 0; ; {
		if s.stopCtx.Err() != nil {
			return nil //nolint:nilerr // stopping is the normal way out of the loop
		}
		var (
			batch sdk.SourceBatch
			ack   sdk.AckFunc
		)
		err := recoverCall(func() (err error) {
			batch, ack, err = s.src.Read(s.stopCtx)
			return err
		})
		if err != nil {
			if errors.Is(err, sdk.ErrEndOfInput) {
				return err
			}
			if s.stopCtx.Err() != nil {
				return nil //nolint:nilerr // a read cut short by the stop is not a failure
			}
			failures++
			s.status.fail(fmt.Errorf("read: %w", err))
			s.log.Warn("source read failed; retrying", "error", err, "attempt", failures)
			if !sleep(s.stopCtx, sourceBackoff.Delay(failures)) {
				return nil
			}
			continue
		}
		if ack == nil {
			ack = sdk.NoAck
		}
		if ok := s.handle(batch, ack); !ok {
			return nil
		}
		failures = 0
	}
}

// handle sends, saves and acks one batch. It returns false when the runtime stopped before
// the batch was done (the batch was then acked with an error).
func (s *sourceRunner) handle(batch sdk.SourceBatch, ack sdk.AckFunc) bool {
	n := uint64(len(batch.Messages))
	s.counters.produced.Add(n)
	msgs, err := s.encode(batch)
	if err != nil {
		s.counters.rejected.Add(1)
		err = fmt.Errorf("batch rejected: %w", err)
		s.status.fail(err)
		s.log.Error("source batch rejected, nothing sent", "error", err, "messages", n)
		s.ack(ack, err)
		return sleep(s.stopCtx, sourceBackoff.Initial)
	}
	if len(msgs) > 0 {
		if err := s.retry("send", &s.counters.sendErrors, func() error { return s.prod.send(s.hardCtx, msgs) }); err != nil {
			s.ack(ack, fmt.Errorf("%w: %w", errStopping, err))
			return false
		}
		s.counters.sent.Add(n)
	}
	if batch.State != nil {
		// The messages are in Iggy; a state that is not saved would replay them (duplicates,
		// never a skip), so saving is retried like a send.
		if err := s.retry("save state", &s.counters.stateErrs, func() error { return s.state.save(batch.State) }); err != nil {
			s.ack(ack, fmt.Errorf("%w: state not saved: %w", errStopping, err))
			return false
		}
	}
	s.ack(ack, nil)
	s.counters.acked.Add(n)
	return true
}

// retry runs op until it succeeds, waiting sourceBackoff between attempts. Waits end at the
// graceful stop; op itself sees hardCtx. It returns op's last error (or the stop) when the
// runtime stops first.
func (s *sourceRunner) retry(what string, errs *atomic.Uint64, op func() error) error {
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !sleep(s.stopCtx, sourceBackoff.Delay(attempt)) {
			return fmt.Errorf("%s: gave up at stop after %d attempts", what, attempt)
		}
		if s.hardCtx.Err() != nil {
			return s.hardCtx.Err()
		}
		err := op()
		if err == nil {
			if attempt > 0 {
				s.status.set(StateRunning)
				s.log.Info(what+" succeeded after retries", "attempts", attempt+1)
			}
			return nil
		}
		if s.hardCtx.Err() != nil {
			return err
		}
		errs.Add(1)
		s.status.fail(fmt.Errorf("%s: %w", what, err))
		s.log.Warn(what+" failed; retrying", "error", err, "attempt", attempt+1)
	}
}

func (s *sourceRunner) encode(b sdk.SourceBatch) ([]sdk.ProducedMessage, error) {
	if b.Schema == "" || b.Schema == s.stream.Schema || s.stream.Schema == sdk.SchemaRaw {
		return b.Messages, nil
	}
	out := make([]sdk.ProducedMessage, len(b.Messages))
	for i, m := range b.Messages {
		p, err := encodePayload(b.Schema, s.stream.Schema, m.Payload)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		m.Payload = p
		out[i] = m
	}
	return out, nil
}

// ack calls the batch's AckFunc once; its error is logged (a native G4 plugin refuses a
// result after its own timeout).
func (s *sourceRunner) ack(ack sdk.AckFunc, result error) {
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	if err := recoverCall(func() error { return ack(ctx, result) }); err != nil {
		s.log.Warn("source ack failed", "error", err, "nack", result != nil)
	}
}

// recoverCall runs fn, turning a panic into an error.
func recoverCall(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("connector panicked: %v", r)
		}
	}()
	return fn()
}
