package connect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
	"go.opentelemetry.io/otel/trace"
)

// sinkRunner runs one sink connector: one sdk.Sink instance and one topicConsumer per
// stream × topic, stopped by one lifecycle whose timeout is the sink's shutdown_timeout
// (docs/architecture.md, "Lifecycle of a connector").
type sinkRunner struct {
	runner
	cfg      *config.Sink
	instance uint32
	policy   commitPolicy
	sink     sdk.Sink
	be       backend
	counters *Counters // the slot's: they outlive the instance (restarts never reset them)
	proc     *batchProcessor
	dlq      producer
	topics   []*topicConsumer
	// routes maps (stream id, topic id) to the topic's partition table, for commits;
	// set once, when every consumer is created.
	routes atomic.Pointer[map[topicKey]*partitionTable]
	held   atomic.Bool // paused by the operator (Runtime.Pause)
	// inFlight is how many batches of one topic may be inside Consume at once, for
	// different partitions (max_in_flight, capped by what the sink accepts).
	inFlight int
	// tracer opens a trace per polled batch (tracing.go); nil when traces are off.
	tracer trace.Tracer
}

type topicKey struct{ stream, topic uint32 }

// newSinkRunner builds a sink runner counting into counters (nil: counters of its own).
func newSinkRunner(cfg *config.Sink, instance uint32, sink sdk.Sink, be backend, counters *Counters, log *slog.Logger) *sinkRunner {
	if counters == nil {
		counters = new(Counters)
	}
	s := &sinkRunner{cfg: cfg, instance: instance, policy: policyFor(cfg), sink: sink, be: be, counters: counters}
	s.init(KindSink, cfg.Key, cfg.Name, cfg.ShutdownTimeout, &counters.StartErrors, log.With("sink", cfg.Key, "instance", instance))
	s.bench = newBenchLog(cfg.Benchmark, log)
	s.proc = &batchProcessor{sink: sink, commit: s.policy, failure: sinkFailurePolicy(cfg, s.counters, s.log),
		counters: s.counters, log: s.log}
	return s
}

// retryBackoff paces retries that never give up: polls and offset stores.
func (s *sinkRunner) retryBackoff() Backoff {
	return Backoff{Initial: s.cfg.Retry.InitialBackoff, Max: s.cfg.Retry.MaxBackoff}
}

func (s *sinkRunner) begin(ctx context.Context) {
	if s.sink != nil {
		_ = s.start(ctx) // a failure is logged and kept in the status by failStart
	}
}

// start opens the sink, creates its consumers and starts them; ctx bounds the opening.
// On error everything created is released (within shutdown_timeout), the status is
// error and the runner is stopped.
func (s *sinkRunner) start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			s.failStart(err)
		}
	}()
	env := sdk.SinkEnv{Key: s.cfg.Key, Config: s.cfg.PluginConfig, Logger: s.log, OnFailure: s.proc.failure.onFailure}
	if s.policy.sinkCommits {
		env.Committer = sinkCommitter{s}
	}
	if err := callSafely(func() error { return s.sink.Open(ctx, env) }); err != nil {
		s.logOpenFailed(err)
		return fmt.Errorf("open: %w", err)
	}
	if keeper, ok := s.sink.(sdk.PositionKeeper); ok {
		var keeps bool
		if err := callSafely(func() error { keeps = keeper.KeepsPositions(); return nil }); err == nil && keeps {
			before := s.policy
			s.policy = s.policy.forKeeper(s.cfg.Commit)
			s.proc.commit = s.policy
			s.log.Info("the sink keeps its own positions: offsets stored in Iggy show its progress", "store_delay", s.policy.storeDelay)
			if before.serverStores && !s.policy.serverStores {
				s.log.Info("offset_commit = after_polling: Iggy's offset is stored after each batch the sink wrote, not with the poll, so a partition not in its target yet is not skipped after a crash")
			}
		}
	}
	// Asked after Open: a sink's limit may come from its config (a pool's size).
	if s.inFlight, err = maxInFlight(s.cfg, s.sink, s.log); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		_ = callSafely(func() error { return s.sink.Close(cctx) })
		return err
	}
	if err := s.connect(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		for _, tc := range s.topics {
			_ = tc.cons.Close(cctx)
		}
		if s.dlq != nil {
			_ = s.dlq.close(cctx)
		}
		_ = callSafely(func() error { return s.sink.Close(cctx) })
		return err
	}
	// Routes first: a batch may be consumed, and committed, as soon as its consumer starts.
	routes := make(map[topicKey]*partitionTable, len(s.topics))
	for _, tc := range s.topics {
		routes[topicKey{tc.topic.StreamID, tc.topic.TopicID}] = tc.table
	}
	s.routes.Store(&routes)
	for _, tc := range s.topics {
		tc.start(s.life)
	}
	go s.run()
	if !s.status.started() {
		return nil // failed already: run stops it
	}
	s.log.Info("sink running", "offset_commit", s.policy.mode, "on_failure", s.proc.failure.String(), "consumers", len(s.topics), "max_in_flight", s.inFlight)
	s.logInitialized(s.instance)
	for range s.topics {
		s.log.Info(sinkConsumingLine(s.instance))
	}
	s.bench.enabled(KindSink, s.instance, s.cfg.Key)
	return nil
}

func (s *sinkRunner) connect(ctx context.Context) error {
	if dl, ok := s.proc.failure.deadLetterTopic(s.cfg.DeadLetter); ok {
		dlq, err := s.be.newProducer(ctx, producerConfig{Stream: dl.Stream, Topic: dl.Topic})
		if err != nil {
			return fmt.Errorf("dead-letter producer %s/%s: %w", dl.Stream, dl.Topic, err)
		}
		s.dlq, s.proc.failure.dlq = dlq, dlq
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
			tc := newTopicConsumer(s, meta, st.Schema, s.log.With("stream", st.Stream, "topic", topic))
			avro, err := avroSchemaText(st.Schema, st.AvroSchemaJSON, st.AvroSchemaPath)
			if err != nil {
				return fmt.Errorf("stream %s: %w", st.Stream, err)
			}
			for range s.inFlight {
				pipe, err := newPayloadPipeline(st.Schema, avro, s.cfg.Transforms)
				if err != nil {
					return fmt.Errorf("%w: stream %s: %w", errPermanent, st.Stream, err)
				}
				tc.convs = append(tc.convs, &converter{pipe: pipe})
			}
			cons, err := s.be.newConsumer(ctx, consumerConfig{Stream: st.Stream, Topic: topic, Group: group,
				BatchSize: st.BatchLength, PollInterval: st.PollInterval, AutoCommit: s.policy.serverStores,
				OnChange: tc.onChange})
			if err != nil {
				return fmt.Errorf("consumer %s/%s group %s: %w", st.Stream, topic, group, err)
			}
			tc.cons, tc.table.flow, tc.group = cons, cons, group
			s.topics = append(s.topics, tc)
		}
	}
	return nil
}

// route returns the partition table of a stream and topic of this sink, or nil.
func (s *sinkRunner) route(stream, topic uint32) *partitionTable {
	if m := s.routes.Load(); m != nil {
		return (*m)[topicKey{stream, topic}]
	}
	return nil
}

// sinkCommitter is a sink's sdk.Committer: a small value, safe to copy and to call from
// any goroutine (including a native plugin's thread through connect/plugin). It routes
// each commit to its partition table; it never blocks and never calls into the sink.
type sinkCommitter struct{ s *sinkRunner }

// Commit implements sdk.Committer.
func (c sinkCommitter) Commit(p sdk.Partition, offset uint64) error {
	t := c.s.route(p.StreamID, p.TopicID)
	if t == nil {
		c.s.counters.CommitsUnknownPartition.Add(1)
		return fmt.Errorf("%w: stream %d topic %d partition %d offset %d: not a topic of this sink",
			sdk.ErrCommitUnknownPartition, p.StreamID, p.TopicID, p.PartitionID, offset)
	}
	return t.commit(p.PartitionID, offset)
}

// fail records a batch that failed for good under on_failure = stop and stops the sink.
func (s *sinkRunner) fail(err error) {
	s.log.Error(sinkConsumeFailedLine(s.instance, err))
	s.status.fail(err)
	s.life.Stop()
}

// run waits for the stop and runs the shutdown sequence, all of it within the sink's one
// shutdown_timeout (the lifecycle turns hard when it passes): stop polling → finish the
// batches being consumed → the sink's Close (it may still commit) → close the tables
// and store what is done → leave the groups. What the hard stop cuts short is not
// committed and is redelivered; nothing waits for a Consume or Close that ignores its
// context.
func (s *sinkRunner) run() {
	defer s.life.Finish()
	<-s.life.soft.Done()
	if st, _ := s.status.get(); st != StateError {
		s.status.set(StateStopping)
	}
	finished := true
	for _, tc := range s.topics {
		if !s.life.waitOrAbandon(tc.consumeDone) {
			finished = false
			break
		}
	}
	for _, tc := range s.topics {
		finished = finished && !tc.abandoned.Load()
	}
	if !finished {
		if d := s.life.Deadline(); d.IsZero() || time.Now().Before(d) {
			s.log.Warn("hard stop: abandoning in-flight batches (they will be redelivered)")
		} else {
			s.log.Warn("in-flight batches did not finish within shutdown_timeout; abandoning them (they will be redelivered)", "shutdown_timeout", s.cfg.ShutdownTimeout)
		}
	}
	var errs []error
	s.logClosing(s.instance)
	if err := s.closeSink(); err != nil {
		errs = append(errs, fmt.Errorf("close sink: %w", err))
	}
	s.logClosed(s.instance)
	for _, tc := range s.topics {
		tc.table.close()
	}
	for _, tc := range s.topics {
		if !s.life.waitOrAbandon(tc.storesDone) {
			errs = append(errs, fmt.Errorf("stream %s topic %s: offsets not stored within shutdown_timeout (they will be redelivered)", tc.topic.Stream, tc.topic.Topic))
		}
	}
	for _, tc := range s.topics {
		s.life.waitOrAbandon(tc.pollDone)
		if err := tc.cons.Close(s.life.hard); err != nil {
			errs = append(errs, fmt.Errorf("leave group on %s/%s: %w", tc.topic.Stream, tc.topic.Topic, err))
		}
		s.log.Info(sinkStoppedConsumingLine(s.instance))
	}
	if s.dlq != nil {
		if err := s.dlq.close(s.life.hard); err != nil {
			errs = append(errs, fmt.Errorf("close dead-letter producer: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("sink stopped with errors", "error", err)
	}
	s.status.stopped()
	s.log.Info("sink stopped")
}

// closeSink calls the sink's Close with the hard-stop context and waits for it, or for
// the hard stop.
func (s *sinkRunner) closeSink() error {
	done := make(chan error, 1)
	go func() { done <- callSafely(func() error { return s.sink.Close(s.life.hard) }) }()
	select {
	case err := <-done:
		return err
	case <-s.life.hard.Done():
		select {
		case err := <-done:
			return err
		default:
			return errors.New("Close did not return within shutdown_timeout; abandoned")
		}
	}
}

// hold pauses (on) or resumes the polling of every topic consumer (Runtime.Pause).
func (s *sinkRunner) hold(on bool) {
	s.held.Store(on)
	for _, tc := range s.topics {
		tc.table.hold(on)
	}
	if on {
		s.log.Info("sink paused: polling stopped, membership and commits kept")
	} else {
		s.log.Info("sink resumed")
	}
}

// statusOf reports the connector's status.
func (s *sinkRunner) statusOf() Status {
	st, le := s.status.get()
	out := Status{Key: s.cfg.Key, Kind: KindSink, Name: s.cfg.Name, State: st, LastError: le, Stats: s.counters.Snapshot(),
		ID: s.instance, Enabled: s.cfg.Enabled, Version: s.cfg.Version, Path: s.cfg.Path, PluginVersion: s.pluginVersion(),
		Paused: s.held.Load(), Sink: s.cfg}
	if st == StateStarting {
		return out // its topics are being connected (start)
	}
	for _, tc := range s.topics {
		out.Partitions = append(out.Partitions, tc.table.status()...)
	}
	slices.SortStableFunc(out.Partitions, func(a, b PartitionStatus) int {
		return cmp.Or(cmp.Compare(a.Stream, b.Stream), cmp.Compare(a.Topic, b.Topic))
	})
	return out
}

func (s *sinkRunner) pluginVersion() string { return pluginVersion(&s.cfg.Common, s.sink) }
