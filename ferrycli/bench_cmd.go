package ferrycli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/server"
)

type benchFlags struct {
	messages   uint64
	payload    int
	batch      int
	partitions uint32
	modes      []string
	timeout    time.Duration
	keep       bool
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure end-to-end throughput per commit mode on an embedded server",
		Long: `Bench starts an embedded server in a temporary directory and, for each commit mode, runs
the built-in random source into a fresh topic and a discarding sink reading it (in
sink_controlled mode the sink commits each batch's last offset at once). It reports the
time until every message was delivered to the sink, messages per second, and the ratio to
after_polling. Data is synced as in production (fsync on every acknowledged write).`,
		Example: `  ferry bench
  ferry bench --messages 1000000 --payload 1000 --partitions 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	fl := cmd.Flags()
	fl.Uint64Var(&f.messages, "messages", 200_000, "messages per mode")
	fl.IntVar(&f.payload, "payload", 100, "payload bytes per message")
	fl.IntVar(&f.batch, "batch", 1000, "source batch size and sink batch_length")
	fl.Uint32Var(&f.partitions, "partitions", 1, "partitions per topic")
	fl.StringSliceVar(&f.modes, "modes", []string{string(config.CommitAfterPolling), string(config.CommitAfterConsuming), string(config.CommitSinkControlled)}, "commit modes to measure")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "bound per mode")
	fl.BoolVar(&f.keep, "keep", false, "keep the temporary directory")
	return cmd
}

type benchResult struct {
	mode      string
	elapsed   time.Duration
	committed time.Duration // until the runtime stored the last offset (0: not measured)
}

func bench(ctx context.Context, w io.Writer, f benchFlags) (err error) {
	if f.messages == 0 || f.batch <= 0 || f.payload < 0 || f.partitions == 0 {
		return errors.New("bench: --messages, --batch and --partitions must be positive")
	}
	dir, err := os.MkdirTemp("", "ferry-bench-")
	if err != nil {
		return err
	}
	if !f.keep {
		defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.Start(ctx, server.Config{Addr: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), Logger: quiet})
	if err != nil {
		return fmt.Errorf("bench: embedded server: %w", err)
	}
	defer func() { err = errors.Join(err, srv.Close(context.Background())) }()
	c, err := iggy.Dial(ctx, srv.Addr(), iggy.WithLogger(quiet))
	if err != nil {
		return fmt.Errorf("bench: connect: %w", err)
	}
	defer func() { err = errors.Join(err, c.Close()) }()

	fmt.Fprintf(w, "ferry bench: %d messages of %d B, batch %d, %d partition(s), random source → discarding sink\n",
		f.messages, f.payload, f.batch, f.partitions)
	var results []benchResult
	for _, mode := range f.modes {
		r, err := benchMode(ctx, c, dir, mode, f, quiet)
		if err != nil {
			return fmt.Errorf("bench %s: %w", mode, err)
		}
		results = append(results, r)
	}
	fmt.Fprintf(w, "%-16s %10s %14s %8s %16s\n", "mode", "seconds", "messages/s", "ratio", "all committed")
	base := results[0].elapsed
	for _, r := range results {
		rate := float64(f.messages) / r.elapsed.Seconds()
		comm := "server (on poll)"
		if r.committed > 0 {
			comm = fmt.Sprintf("%.3fs", r.committed.Seconds())
		}
		fmt.Fprintf(w, "%-16s %10.3f %14.0f %7.2fx %16s\n", r.mode, r.elapsed.Seconds(), rate, base.Seconds()/r.elapsed.Seconds(), comm)
	}
	fmt.Fprintf(w, "ratio = %s time / mode time (1.00x = as fast; below 1 = slower)\n", results[0].mode)
	return nil
}

func benchMode(ctx context.Context, c *iggy.Client, dir, mode string, f benchFlags, log *slog.Logger) (benchResult, error) {
	res := benchResult{mode: mode}
	stream := "bench_" + mode
	cdir := filepath.Join(dir, "connectors_"+mode)
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return res, err
	}
	src := fmt.Sprintf(`type = "source"
key = "bench_random"
enabled = true
version = 0
name = "bench random"
path = "builtin:random"
[[streams]]
stream = %q
topic = "t"
schema = "raw"
batch_length = %d
[plugin_config]
count = %d
payload_size = %d
batch_size = %d
seed = 1
`, stream, f.batch, f.messages, f.payload, f.batch)
	snk := fmt.Sprintf(`type = "sink"
key = "bench_sink"
enabled = true
version = 0
name = "bench sink"
path = "builtin:bench"
offset_commit = %q
[[streams]]
stream = %q
topics = ["t"]
schema = "raw"
batch_length = %d
poll_interval = "1ms"
[commit]
interval = "100ms"
`, mode, stream, f.batch)
	if err := os.WriteFile(filepath.Join(cdir, "source.toml"), []byte(src), 0o644); err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(cdir, "sink.toml"), []byte(snk), 0o644); err != nil {
		return res, err
	}
	conns, err := config.LoadConnectors(cdir, nil)
	if err != nil {
		return res, err
	}
	if err := c.EnsureTopic(ctx, stream, "t", f.partitions); err != nil {
		return res, err
	}
	rc := config.DefaultRuntime()
	rc.State.Path = filepath.Join(dir, "state_"+mode)
	reg := connectors.Registry().AddSink("bench", func() sdk.Sink { return &benchSink{} })
	rt, err := connect.New(connect.Options{Connectors: conns, Runtime: rc, Client: c, Builtins: reg, Logger: log})
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := rt.Start(ctx); err != nil {
		return res, err
	}
	defer func() { _ = rt.Stop(context.WithoutCancel(ctx)) }()
	deadline := time.After(f.timeout)
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-deadline:
			return res, fmt.Errorf("not done within %s: %s", f.timeout, statusLine(rt.Status()))
		case <-t.C:
		}
		var delivered, committed uint64
		for _, st := range rt.Status() {
			if st.State == connect.StateError && st.LastError != nil {
				return res, fmt.Errorf("%s %s: %s", st.Kind, st.Key, st.LastError.Message)
			}
			if st.Kind == "sink" {
				delivered, committed = st.Stats.Delivered, st.Stats.Committed
			}
		}
		if delivered >= f.messages && res.elapsed == 0 {
			res.elapsed = time.Since(start)
		}
		if mode == string(config.CommitAfterPolling) && res.elapsed > 0 {
			return res, nil
		}
		if committed >= f.messages && res.elapsed > 0 {
			res.committed = time.Since(start)
			return res, nil
		}
	}
}

func statusLine(sts []connect.Status) string {
	var b strings.Builder
	for _, st := range sts {
		fmt.Fprintf(&b, "%s %s %s %+v; ", st.Kind, st.Key, st.State, st.Stats)
	}
	return b.String()
}

// benchSink discards batches; with a Committer (sink_controlled) it commits each batch's
// last offset at once.
type benchSink struct{ committer sdk.Committer }

func (s *benchSink) Open(_ context.Context, env sdk.SinkEnv) error {
	s.committer = env.Committer
	return nil
}

func (s *benchSink) Consume(_ context.Context, _ sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	if s.committer != nil && len(msgs) > 0 {
		return s.committer.Commit(meta.Partition, msgs[len(msgs)-1].Offset)
	}
	return nil
}

func (s *benchSink) Close(context.Context) error { return nil }
