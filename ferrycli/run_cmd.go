package ferrycli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/metrics"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/server"
)

type runFlags struct {
	config       string
	embedded     bool
	data         string
	progress     time.Duration
	duration     time.Duration
	exitIdle     time.Duration
	partitions   uint32
	logLevel     string
	stopTimeout  time.Duration
	dialTimeout  time.Duration
	printStatus  bool
	embeddedAddr string
	initData     bool
	createTopics bool
	builtins     *sdk.Registry // the Go connectors ("builtin:NAME"); nil: connectors.Registry()
	version      string        // reported by the HTTP API; "": the embedded VERSION file's
	logTo        io.Writer     // nil = stderr (a test reads the logs)
}

func newRunCmd(builtins *sdk.Registry, version string) *cobra.Command {
	f := runFlags{builtins: builtins, version: version}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the connectors of a config.toml (sources → Iggy → sinks)",
		Long: `Run loads the runtime config (Iggy's iggy-connectors config.toml) and the connector files
of its config_dir, connects to Iggy and runs every enabled connector until SIGINT/SIGTERM.
The first signal stops gracefully (in-flight batches finish, pending commits are written);
a second one exits at once.

With --embedded, Ferry starts its own Iggy-compatible server in the same process (data in
--data or [embedded] data_dir) and creates the streams and topics the connectors name.

Every flag can also come from its environment variable (FERRY_CONFIG, FERRY_EMBEDDED,
FERRY_DATA, FERRY_PROGRESS, FERRY_PARTITIONS, FERRY_LOG_LEVEL).`,
		Example: `  ferry run --config examples/quickstart/config.toml --embedded
  ferry run --config config.toml --progress 5s
  ferry run --config config.toml --embedded --exit-when-idle 2s   # scripted runs / CI`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRuntime(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", envString(envConfig, ""), "runtime config.toml (default: IGGY_CONNECTORS_CONFIG_PATH, then "+`core/connectors/runtime/config.toml`+") [FERRY_CONFIG]")
	fl.BoolVar(&f.embedded, "embedded", envBool(envEmbedded, false), "start the embedded Iggy server in this process [FERRY_EMBEDDED]")
	fl.StringVar(&f.data, "data", envString(envData, ""), "embedded server data directory (default [embedded] data_dir, \"ferry_data\") [FERRY_DATA]")
	fl.BoolVar(&f.initData, "init", false, "with --embedded: start with an empty data dir even where a server stored data before")
	fl.StringVar(&f.embeddedAddr, "embedded-addr", "", "embedded server listen address (default [embedded] address, else iggy.address)")
	fl.DurationVar(&f.progress, "progress", envDuration(envProgress, time.Second), "print progress to stderr every interval; 0 = never [FERRY_PROGRESS]")
	fl.DurationVar(&f.duration, "duration", 0, "stop gracefully after this long; 0 = run until a signal")
	fl.DurationVar(&f.exitIdle, "exit-when-idle", 0, "stop gracefully once no counter moved for this long (sources ended or idle, sinks drained) and no connector waits for a restart; 0 = never")
	fl.Uint32Var(&f.partitions, "partitions", uint32(envUint(envPartitions, 1)), "partitions of topics created by --embedded or --create-topics [FERRY_PARTITIONS]")
	fl.BoolVar(&f.createTopics, "create-topics", false, "before starting, create every stream and topic an enabled connector names and lacks: sinks' topics, sources' target topics and dead-letter topics, and while running the topics a source routes messages to (the MQTT source's topic_mapping) at their first message (with --partitions partitions, each logged at INFO; always on with --embedded). Without it nothing is created: a connector whose stream or topic is missing fails its start")
	fl.StringVar(&f.logLevel, "log-level", envString(envLogLevel, "info"), "debug, info, warn or error [FERRY_LOG_LEVEL]")
	fl.DurationVar(&f.stopTimeout, "stop-timeout", 30*time.Second, "bound on the graceful stop; then in-flight work is abandoned (and redelivered later)")
	fl.DurationVar(&f.dialTimeout, "connect-timeout", 30*time.Second, "bound on connecting to Iggy at startup")
	fl.BoolVar(&f.printStatus, "status", true, "print each connector's final status to stderr at exit")
	return cmd
}

func runRuntime(ctx context.Context, f runFlags) (err error) {
	if f.partitions == 0 {
		return errors.New("--partitions must be at least 1")
	}
	hups, stopHUP := catchHUP()
	defer stopHUP()
	logTo := f.logTo
	if logTo == nil {
		logTo = os.Stderr
	}
	plan, err := prepareStart(startOptions{ctx: ctx, logTo: logTo, logLevel: f.logLevel, config: f.config, createDir: true,
		embedded: f.embedded, data: f.data, embeddedAddr: f.embeddedAddr, initData: f.initData})
	if err != nil {
		return err
	}
	defer plan.closeStore()
	rc, conns, log := plan.rc, plan.conns, plan.log
	tel, log, err := startTelemetry(ctx, rc.Telemetry, f.logLevel, orVersion(f.version), log)
	if err != nil {
		return err
	}
	// Native plugins log through slog.Default (connect/plugin): make it this logger, so
	// their lines take the configured format and are exported with the others.
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(log)
	defer func() {
		// The last spans, records and metrics are flushed within a bound of their own:
		// an unreachable receiver must not hold the exit.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryFlushTimeout)
		defer cancel()
		if terr := tel.Shutdown(sctx); terr != nil {
			log.Warn("telemetry not flushed", "error", terr)
		}
	}()
	for _, w := range append(append([]string(nil), rc.Warnings...), conns.Warnings...) {
		log.Warn(w)
	}
	srcKey, src := "config_dir", absDir(rc.Connectors.ConfigDir)
	if rc.Connectors.ConfigType == config.ProviderHTTP {
		srcKey, src = "provider", config.RedactURL(rc.Connectors.BaseURL)
	}
	log.Info("config loaded", "config", rc.Path, srcKey, src,
		"sources", len(conns.Sources), "sinks", len(conns.Sinks), "invalid", len(conns.Invalid), "plugin_dirs", rc.PluginDirs())
	if displayConfig() {
		// Secrets redacted (Runtime.String, Sink/Source.String).
		log.Info("effective runtime config", "config", rc.String())
		for _, s := range conns.Sinks {
			log.Info("effective sink config", "sink", s.String())
		}
		for _, s := range conns.Sources {
			log.Info("effective source config", "source", s.String())
		}
	}

	// Listeners first (the API, the embedded server), then Iggy, then the connectors: a
	// taken port fails the run before any connector has run. The state directory comes
	// before the API, which writes its URL there.
	sdir := stateDir(rc)
	if err := connect.EnsureStateDir(sdir); err != nil {
		return err
	}
	ln, err := listenAPI(rc)
	if err != nil {
		return err
	}
	if ln != nil {
		defer func() {
			if ln != nil { // not handed to serveAPI
				_ = ln.Close()
			}
		}()
	}
	addr := rc.Iggy.Address
	var srv *server.Server
	if plan.embedded != nil {
		cfg := *plan.embedded
		cfg.Logger = log.With("component", "server")
		srv, err = server.Start(ctx, cfg)
		if err != nil {
			return fmt.Errorf("embedded server: %w", err)
		}
		defer func() {
			if cerr := srv.Close(context.Background()); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}()
		addr = srv.Addr()
		log.Info("embedded Iggy server started", "addr", addr)
	}

	opts, err := clientOptions(rc.Iggy, log.With("component", "iggy"))
	if err != nil {
		return err
	}
	client, err := dialWithin(ctx, addr, f.dialTimeout, opts, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, client.Close()) }()

	if srv != nil || f.createTopics {
		ectx, cancel := context.WithTimeout(ctx, f.dialTimeout)
		err := ensureTopics(ectx, client, conns, f.partitions, log)
		cancel()
		if err != nil {
			return fmt.Errorf("create topics: %w", err)
		}
	}

	provider := plan.store
	var createRouted uint32 // the topics sources route to are known only when their messages come
	if srv != nil || f.createTopics {
		createRouted = f.partitions
	}
	rt, err := connect.New(connect.Options{Connectors: conns, Runtime: rc, Client: client, Configs: provider,
		Builtins: orBuiltins(f.builtins), LoadSinkPlugin: connect.NativeSinkLoader, LoadSourcePlugin: connect.NativeSourceLoader, Logger: log,
		Tracer: tel.TracerOrNil(), CreateRoutedTopics: createRouted})
	if err != nil {
		return err
	}
	if err := tel.StartMetrics(ctx, rc.Telemetry.Metrics, metrics.Gatherer(rt)); err != nil {
		return err
	}
	// /health answers 200 only once every connector has left starting (Start returns after
	// each one's first start ended: running, degraded or error), as upstream's API, which
	// listens only after the connectors started; the status page is served meanwhile.
	var startDone atomic.Bool
	health := func() error {
		if !startDone.Load() {
			return errStarting
		}
		if srv != nil {
			return srv.StorageFault()
		}
		return nil
	}
	apiURL, stopAPI, err := serveAPI(ctx, rc, ln, sdir, rt, provider, orVersion(f.version), health, log)
	ln = nil // serveAPI owns it now
	if err != nil {
		return err
	}
	defer stopAPI()
	if err := rt.Start(ctx); err != nil {
		return err
	}
	startDone.Store(true)
	log.Info(lineSpawned)
	for _, st := range rt.Status() {
		if st.State == connect.StateError && st.LastError != nil {
			log.Error("connector failed to start", "kind", st.Kind, "key", st.Key, "error", st.LastError.Message)
		}
	}

	prog := newProgress(os.Stderr)
	prog.apiURL = apiURL
	stopReloads := reloadOnHUP(ctx, hups, rt, f.stopTimeout, log)
	why := supervise(ctx, rt, f, prog)
	stopReloads()
	log.Info("stopping", "reason", why)
	log.Info(shutdownLine(ctx, why))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.stopTimeout)
	defer cancel()
	stopErr := rt.Stop(sctx)
	final := rt.Status()
	if f.progress > 0 {
		prog.print(sum(final), time.Now())
	}
	if f.printStatus {
		printStatus(final)
	}
	if stopErr != nil {
		return fmt.Errorf("graceful stop did not finish within %s: %w", f.stopTimeout, stopErr)
	}
	log.Info(lineShutdownComplete)
	var failed []string
	for _, st := range final {
		if st.State == connect.StateError {
			msg := ""
			if st.LastError != nil {
				msg = st.LastError.Message
			}
			failed = append(failed, fmt.Sprintf("%s %s: %s", st.Kind, st.Key, msg))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("connectors in error: %s", strings.Join(failed, "; "))
	}
	return nil
}

// reasonAllFailed is supervise's answer when every enabled connector failed for good.
const reasonAllFailed = "every connector failed for good"

// The runtime's start and end lines in the words of Iggy's runtime, which operators'
// alerts match on (docs/iggy-compatibility.md, "Log lines, JSON logs and exit codes"),
// written beside Ferry's own.
const (
	lineSpawned          = "All sources and sinks spawned."
	lineShutdownComplete = "All connectors closed. Runtime shutdown complete."
)

// dialWithin connects to Iggy, retrying with backoff until timeout: a server that is
// still starting (connection refused) is waited for, as a service manager expects.
// errStarting is /health's reason while the connectors start.
var errStarting = errors.New("starting: the connectors' first start has not ended")

func dialWithin(ctx context.Context, addr string, timeout time.Duration, opts []iggy.Opt, log *slog.Logger) (*iggy.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		client, err := iggy.Dial(dctx, addr, opts...)
		if err == nil {
			return client, nil
		}
		if !errors.Is(err, iggy.ErrNotConnected) || dctx.Err() != nil {
			return nil, fmt.Errorf("connect to Iggy at %s (within --connect-timeout %s, %d attempts): %w", addr, timeout, attempt, err)
		}
		log.Warn("Iggy not reachable yet; retrying", "addr", addr, "attempt", attempt, "in", wait, "error", err)
		select {
		case <-dctx.Done():
			return nil, fmt.Errorf("connect to Iggy at %s (within --connect-timeout %s, %d attempts): %w", addr, timeout, attempt, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// supervise prints progress and waits for the reason to stop: a signal (ctx), --duration,
// or --exit-when-idle.
func supervise(ctx context.Context, rt *connect.Runtime, f runFlags, p *progress) string {
	tick := 100 * time.Millisecond
	if f.progress > 0 && f.progress < tick {
		tick = f.progress
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var deadline <-chan time.Time
	if f.duration > 0 {
		dt := time.NewTimer(f.duration)
		defer dt.Stop()
		deadline = dt.C
	}
	last := sum(rt.Status())
	lastMove, lastPrint := time.Now(), time.Now()
	announced := false // the caught-up line was printed and nothing moved since
	for {
		select {
		case <-ctx.Done():
			return "signal"
		case <-rt.Failed():
			return reasonAllFailed
		case <-deadline:
			return "duration elapsed"
		case now := <-t.C:
			sts := rt.Status()
			cur := sum(sts)
			if cur.moved(last) {
				last, lastMove, announced = cur, now, false
			}
			if f.progress > 0 && now.Sub(lastPrint) >= f.progress && !announced {
				p.print(cur, now)
				lastPrint = now
				if line, ok := caughtUp(sts, serverOffsets(ctx, rt), p.apiURL); ok {
					fmt.Fprintln(p.w, line) // once, instead of "0/s" lines for ever
					announced = true
				}
			}
			if f.exitIdle > 0 && cur.restarting == 0 && now.Sub(lastMove) >= f.exitIdle {
				return "idle"
			}
		}
	}
}

func printStatus(sts []connect.Status) {
	for _, st := range sts {
		line := fmt.Sprintf("%-6s %-24s %-8s", st.Kind, st.Key, st.State)
		if st.Kind == "source" {
			line += fmt.Sprintf(" produced=%d sent=%d acked=%d send_errors=%d", st.Stats.Produced, st.Stats.Sent, st.Stats.Committed, st.Stats.SendErrors)
		} else {
			line += fmt.Sprintf(" polled=%d delivered=%d committed=%d consume_errors=%d", st.Stats.Polled, st.Stats.Delivered, st.Stats.Committed, st.Stats.ConsumeErrors)
		}
		if st.LastError != nil {
			line += " error=" + st.LastError.Message
		}
		fmt.Fprintln(os.Stderr, line)
	}
}
