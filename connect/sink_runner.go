package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// sinkRunner runs one sink connector: one sdk.Sink instance and one topicRunner per
// stream × topic.
//
// Contexts: abandonCtx ends on the runtime's hard stop (second Stop, expired Stop ctx) and
// bounds everything; consumeCtx (its child) is what Consume sees and is also cancelled when
// the in-flight batches outlive shutdown_timeout; pollCtx ends polling (graceful stop, or
// a batch that failed for good under on_failure = stop).
type sinkRunner struct {
	cfg      *config.Sink
	instance uint32
	sink     sdk.Sink
	reg      *registry
	be       backend
	log      *slog.Logger
	counters Counters
	status   statusCell
	proc     *batchProcessor
	dlq      deadLetterProducer
	topics   []*topicRunner

	pollCtx       context.Context
	cancelPoll    context.CancelFunc
	consumeCtx    context.Context
	cancelConsume context.CancelFunc
	abandonCtx    context.Context
	cancelAbandon context.CancelFunc
	done          chan struct{}
	failOnce      sync.Once
}

func newSinkRunner(cfg *config.Sink, instance uint32, sink sdk.Sink, reg *registry, be backend, log *slog.Logger) *sinkRunner {
	s := &sinkRunner{cfg: cfg, instance: instance, sink: sink, reg: reg, be: be,
		log: log.With("sink", cfg.Key, "instance", instance), done: make(chan struct{})}
	s.abandonCtx, s.cancelAbandon = context.WithCancel(context.Background())
	s.consumeCtx, s.cancelConsume = context.WithCancel(s.abandonCtx)
	s.pollCtx, s.cancelPoll = context.WithCancel(s.abandonCtx)
	s.proc = &batchProcessor{sink: sink, mode: cfg.OffsetCommit, policy: cfg.OnFailure,
		backoff:  Backoff{Initial: cfg.Retry.InitialBackoff, Max: cfg.Retry.MaxBackoff, MaxRetries: cfg.Retry.MaxRetries},
		counters: &s.counters, log: s.log}
	s.status.set(StateStarting)
	return s
}

// storeBackoff paces retries of offset stores and polls (never exhausted).
func (s *sinkRunner) storeBackoff() Backoff {
	return Backoff{Initial: s.cfg.Retry.InitialBackoff, Max: s.cfg.Retry.MaxBackoff}
}

// start opens the sink, creates its consumers and starts them. On error everything
// created is released and the status is error; the runner is then done.
func (s *sinkRunner) start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			s.status.fail(err)
			s.cancelAbandon()
			close(s.done)
		}
	}()
	env := sdk.SinkEnv{Key: s.cfg.Key, Config: s.cfg.PluginConfig, Logger: s.log}
	if s.cfg.OffsetCommit == config.CommitSinkControlled {
		env.Committer = s.reg.committer(s.instance, &s.counters)
	}
	if err := safeCall(func() error { return s.sink.Open(ctx, env) }); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if err := s.connect(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		for _, t := range s.topics {
			_ = t.cons.Close(cctx)
		}
		if s.dlq != nil {
			_ = s.dlq.Close(cctx)
		}
		_ = safeCall(func() error { return s.sink.Close(cctx) })
		return err
	}
	for _, t := range s.topics {
		t.start(s.pollCtx, s.consumeCtx)
	}
	go s.supervise()
	s.status.set(StateRunning)
	s.log.Info("sink running", "offset_commit", s.cfg.OffsetCommit, "on_failure", s.cfg.OnFailure, "consumers", len(s.topics))
	return nil
}

func (s *sinkRunner) connect(ctx context.Context) error {
	if s.cfg.OnFailure == config.FailureDeadLetter {
		dlq, err := s.be.newDeadLetterProducer(ctx, s.cfg.DeadLetter.Stream, s.cfg.DeadLetter.Topic)
		if err != nil {
			return fmt.Errorf("dead-letter producer %s/%s: %w", s.cfg.DeadLetter.Stream, s.cfg.DeadLetter.Topic, err)
		}
		s.dlq = dlq
		s.proc.dlq = dlq
	}
	for _, st := range s.cfg.Streams {
		group := st.ConsumerGroup
		if group == "" {
			group = config.DefaultConsumerGroup(s.cfg.Key)
		}
		for _, topic := range st.Topics {
			meta, err := s.be.topicMetadata(ctx, st.Stream, topic)
			if err != nil {
				return fmt.Errorf("stream %s topic %s: %w", st.Stream, topic, err)
			}
			cons, err := s.be.newConsumer(ctx, consumerConfig{Stream: st.Stream, Topic: topic, Group: group,
				BatchSize: st.BatchLength, PollInterval: st.PollInterval,
				AutoCommit: s.cfg.OffsetCommit == config.CommitAfterPolling})
			if err != nil {
				return fmt.Errorf("consumer %s/%s group %s: %w", st.Stream, topic, group, err)
			}
			log := s.log.With("stream", st.Stream, "topic", topic)
			s.topics = append(s.topics, newTopicRunner(s, meta, st.Schema, cons, log))
		}
	}
	return nil
}

// fail records a batch that failed for good under on_failure = stop and stops the sink.
func (s *sinkRunner) fail(err error) {
	s.failOnce.Do(func() {
		s.status.fail(err)
		s.cancelPoll()
	})
}

// requestStop begins the graceful stop; idempotent.
func (s *sinkRunner) requestStop() { s.cancelPoll() }

// abandon cuts every wait short: in-flight batches are cancelled and not committed, pending
// commits are not written.
func (s *sinkRunner) abandon() { s.cancelAbandon() }

// supervise waits for the stop signal and runs the shutdown sequence: stop polling → finish
// in-flight batches (bounded) → sink Close → close registry entries and write pending
// commits → leave the groups.
func (s *sinkRunner) supervise() {
	defer close(s.done)
	defer s.cancelAbandon()
	<-s.pollCtx.Done()
	if st, _ := s.status.get(); st != StateError {
		s.status.set(StateStopping)
	}
	timeout := s.cfg.ShutdownTimeout
	drain, cancel := context.WithTimeout(s.abandonCtx, timeout)
	finished := true
	for _, t := range s.topics {
		select {
		case <-t.consumeDone:
		case <-drain.Done():
			finished = false
		}
	}
	// Decided by the waits above, not by drain.Err() after cancel (which is always set).
	if !finished {
		if s.abandonCtx.Err() != nil {
			s.log.Warn("hard stop: abandoning in-flight batches (they will be redelivered)")
		} else {
			s.log.Warn("in-flight batches did not finish within shutdown_timeout; abandoning them (they will be redelivered)", "shutdown_timeout", timeout)
		}
	}
	cancel()
	s.cancelConsume()
	for _, t := range s.topics {
		<-t.consumeDone
		<-t.pollDone
	}
	var errs []error
	cctx, cancel := context.WithTimeout(s.abandonCtx, timeout)
	if err := safeCall(func() error { return s.sink.Close(cctx) }); err != nil {
		errs = append(errs, fmt.Errorf("close sink: %w", err))
	}
	cancel()
	rctx, cancel := context.WithTimeout(s.abandonCtx, timeout)
	for _, t := range s.topics {
		if err := t.release(rctx); err != nil {
			errs = append(errs, fmt.Errorf("release %s/%s: %w", t.topic.Stream, t.topic.Topic, err))
		}
	}
	if s.dlq != nil {
		if err := s.dlq.Close(rctx); err != nil {
			errs = append(errs, fmt.Errorf("close dead-letter producer: %w", err))
		}
	}
	cancel()
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("sink stopped with errors", "error", err)
	}
	s.status.stopped()
	s.log.Info("sink stopped")
}

// statusOf reports the connector's status.
func (s *sinkRunner) statusOf() Status {
	st, le := s.status.get()
	return Status{Key: s.cfg.Key, Kind: "sink", Name: s.cfg.Name, State: st, LastError: le, Stats: s.counters.Snapshot()}
}

// safeCall runs fn, turning a panic into an error wrapping ErrSinkPanic.
func safeCall(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrSinkPanic, r)
		}
	}()
	return fn()
}
