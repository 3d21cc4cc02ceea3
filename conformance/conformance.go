// Package conformance is Ferry's black-box delivery conformance suite: it runs scenarios
// against any connectors runtime that reads Iggy's connector config files and loads Iggy's
// native sink plugins (Ferry, or Iggy's own runtime), and reports, per scenario and commit
// mode, what was expected, what was observed and the verdict.
//
// The runtime is a child process started from a command template; the suite writes its
// config.toml and connector file, produces the data with Ferry's Iggy client to an embedded
// server (or a given one), and judges only from outside: the record file of the probe sink
// (probe/probe.c, compiled on the fly) and the consumer group's offsets stored in the
// server. It never looks inside the runtime.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferryio/ferry/conformance/probe"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server"
)

// Commit modes the suite knows (Ferry's offset_commit values).
const (
	AfterPolling   = "after_polling"
	AfterConsuming = "after_consuming"
	SinkControlled = "sink_controlled"
)

// AllModes are the modes checked by default.
var AllModes = []string{AfterPolling, AfterConsuming, SinkControlled}

// atLeastOnce reports whether mode promises that nothing is lost.
func atLeastOnce(mode string) bool { return mode != AfterPolling }

// Verdict is the outcome of one scenario in one mode.
type Verdict string

// Verdicts.
const (
	Pass         Verdict = "pass"
	Fail         Verdict = "fail"
	NotSupported Verdict = "not supported"
)

// Result is one line of the report.
type Result struct {
	Scenario string  `json:"scenario"`
	Mode     string  `json:"mode"`
	Expected string  `json:"expected"`
	Observed string  `json:"observed"`
	Verdict  Verdict `json:"verdict"`
	// Lost and Duplicated count messages (soak and crash scenarios report them).
	Lost       int `json:"lost"`
	Duplicated int `json:"duplicated"`
	// Kills is the number of SIGKILLs (soak).
	Kills int `json:"kills,omitempty"`
	// Seconds is the scenario's wall time.
	Seconds float64 `json:"seconds"`
}

// Config says what to run against.
type Config struct {
	// Runtime is the command that starts the runtime under test; "{config}" in any
	// argument is replaced by the path of the runtime config file the suite wrote.
	Runtime []string
	// RuntimeEnv are KEY=VALUE entries added to the runtime's environment ({config}
	// replaced too), e.g. IGGY_CONNECTORS_CONFIG_PATH={config}.
	RuntimeEnv []string
	// Server is the address of an Iggy server with root credentials iggy/iggy; empty
	// starts an embedded one.
	Server string
	// ServerCommand runs an Iggy-compatible server as a child process for
	// server-sigkill ("{addr}" and "{data}" replaced by its address and data directory;
	// root credentials iggy/iggy); empty makes that scenario "not supported". ferry
	// conformance uses this binary's `server --addr {addr} --data {data}`.
	ServerCommand []string
	// Username and Password for Server (default iggy/iggy).
	Username, Password string
	// Modes are the commit modes to check (default AllModes).
	Modes []string
	// Scenarios restricts the run to these scenario names (default all of Scenarios()).
	Scenarios []string
	// Soak is the number of SIGKILLs of the soak, postgres-soak, s3-soak, kafka-soak and iceberg-soak scenarios per mode; 0
	// skips them.
	Soak int
	// Postgres is the URL of a PostgreSQL database for postgres-soak (the suite creates
	// one table per run there and drops it); empty makes that scenario "not supported".
	Postgres string
	// PostgresPlugin is the connector file's path for the PostgreSQL sink (default
	// builtin:postgres, Ferry's; another runtime's PostgreSQL sink plugin takes the same
	// official plugin_config keys).
	PostgresPlugin string
	// StorageFaultCode is the error code storage-fault refuses the runtime's offset stores
	// with (default 4006 CannotSaveMessagesToSegment). With the embedded server and the
	// default code the fault is the server's own (it refuses every write); otherwise a
	// proxy in front of the server answers the stores with this code (upstream Iggy
	// answers a failed offset write with 10006 CannotWriteToFile; 20 ResourceNotFound is a
	// server that takes a full disk for a lost partition).
	StorageFaultCode uint32
	// S3 is the S3-compatible server of s3-soak (ParseS3Target; the suite creates a bucket
	// per run there and removes it); nil makes that scenario "not supported".
	S3 *S3Target
	// Kafka is the bootstrap servers (host:port) of a Kafka cluster for kafka-soak (the
	// suite creates a topic per run there and deletes it); empty makes that scenario "not
	// supported".
	Kafka []string
	// Iceberg is the URL of a PostgreSQL database for iceberg-soak's SQL catalog (the
	// suite makes a catalog of its own there and a warehouse in the work directory, and
	// drops the table at the end); empty makes that scenario "not supported".
	Iceberg string
	// Seed makes the chaos (proxy faults, soak kill moments) repeatable.
	Seed int64
	// WorkDir receives config files, records and runtime logs (default a temp dir,
	// removed at the end unless Keep).
	WorkDir string
	Keep    bool
	// CC is the C compiler (default $CC, else cc, else gcc).
	CC string
	// Timeout bounds each wait of a scenario (default 60s).
	Timeout time.Duration
	// Logger receives progress (default discarded).
	Logger *slog.Logger
	// OnResult, when set, is called after each result (progress output).
	OnResult func(Result)
}

// Runner runs scenarios; one per Run.
type Runner struct {
	cfg         Config
	dir         string
	probe       string // path of the compiled probe sink
	sourceProbe string // path of the compiled probe source
	addr        string // server address
	admin       *iggy.Client
	log         *slog.Logger
	seq         int
	server      *server.Server
	fault       *storageFault // the embedded server's storage fault (storage-fault)
}

// Run executes the selected scenarios in every selected mode and returns the results in
// order. An error means the suite itself could not run (no compiler, no server); a
// runtime that misbehaves yields failing results, never an error.
func Run(ctx context.Context, cfg Config) (results []Result, err error) {
	if len(cfg.Modes) == 0 {
		cfg.Modes = AllModes
	}
	for _, m := range cfg.Modes {
		if m != AfterPolling && m != AfterConsuming && m != SinkControlled {
			return nil, fmt.Errorf("conformance: unknown mode %q (want %s)", m, strings.Join(AllModes, ", "))
		}
	}
	if cfg.Username == "" {
		cfg.Username, cfg.Password = "iggy", "iggy"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.StorageFaultCode == 0 {
		cfg.StorageFaultCode = wire.ErrCannotSaveMessagesToSegment.Code
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	selected, err := selectScenarios(cfg.Scenarios)
	if err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, log: cfg.Logger, fault: &storageFault{}}
	if r.dir = cfg.WorkDir; r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "ferry-conformance-"); err != nil {
			return nil, fmt.Errorf("conformance: %w", err)
		}
		if !cfg.Keep {
			defer func() { _ = os.RemoveAll(r.dir) }()
		}
	} else if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, fmt.Errorf("conformance: work dir: %w", err)
	}
	if err := r.buildProbe(ctx); err != nil {
		return nil, err
	}
	if err := r.startServer(ctx); err != nil {
		return nil, err
	}
	defer r.close()
	for _, sc := range selected {
		if (sc.name == "soak" || sc.name == "postgres-soak" || sc.name == "postgres-cdc" || sc.name == "s3-soak" || sc.name == "kafka-soak" || sc.name == "iceberg-soak" || sc.name == "iggy-replication") && cfg.Soak <= 0 {
			continue
		}
		modes := cfg.Modes
		if sourceScenarios[sc.name] {
			modes = []string{SourceMode}
		}
		for _, mode := range modes {
			if only := onlyMode[sc.name]; (only != "" && only != mode) || (atLeastOnceOnly[sc.name] && !atLeastOnce(mode)) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return results, fmt.Errorf("conformance: %w", err)
			}
			start := time.Now()
			res := sc.run(ctx, r, mode)
			res.Scenario, res.Mode = sc.name, mode
			res.Seconds = time.Since(start).Seconds()
			r.log.Info("scenario done", "scenario", res.Scenario, "mode", mode, "verdict", res.Verdict, "observed", res.Observed)
			results = append(results, res)
			if cfg.OnResult != nil {
				cfg.OnResult(res)
			}
		}
	}
	return results, nil
}

// buildProbe compiles the embedded probe sink and probe source into dir/probe.so and
// dir/probe_source.so.
func (r *Runner) buildProbe(ctx context.Context) error {
	cc := r.cfg.CC
	if cc == "" {
		cc = os.Getenv("CC")
	}
	if cc == "" {
		for _, c := range []string{"cc", "gcc"} {
			if _, err := exec.LookPath(c); err == nil {
				cc = c
				break
			}
		}
	}
	if cc == "" {
		return errors.New("conformance: no C compiler (cc or gcc, or set $CC): the probe plugin is built on the fly")
	}
	if err := os.WriteFile(filepath.Join(r.dir, "probe_json.h"), probe.JSONHeader, 0o644); err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	r.probe = filepath.Join(r.dir, "probe.so")
	r.sourceProbe = filepath.Join(r.dir, "probe_source.so")
	for _, p := range []struct {
		name string
		src  []byte
		out  string
	}{{"probe.c", probe.Source, r.probe}, {"source.c", probe.SourcePlugin, r.sourceProbe}} {
		src := filepath.Join(r.dir, p.name)
		if err := os.WriteFile(src, p.src, 0o644); err != nil {
			return fmt.Errorf("conformance: %w", err)
		}
		out, err := exec.CommandContext(ctx, cc, "-std=gnu11", "-O2", "-Wall", "-shared", "-fPIC", "-pthread", "-o", p.out, src).CombinedOutput()
		if err != nil {
			return fmt.Errorf("conformance: compiling the probe plugin %s with %s: %w\n%s", p.name, cc, err, out)
		}
	}
	return nil
}

func (r *Runner) startServer(ctx context.Context) error {
	r.addr = r.cfg.Server
	if r.addr == "" {
		if err := r.startEmbedded(ctx, "127.0.0.1:0"); err != nil {
			return err
		}
	}
	c, err := iggy.Dial(ctx, r.addr, iggy.WithCredentials(r.cfg.Username, r.cfg.Password), iggy.WithLogger(r.log))
	if err != nil {
		r.close()
		return fmt.Errorf("conformance: connect to %s: %w", r.addr, err)
	}
	r.admin = c
	return nil
}

// startEmbedded starts the embedded server on addr with the runner's data directory.
func (r *Runner) startEmbedded(ctx context.Context, addr string) error {
	s, err := server.New(server.Config{
		Addr: addr, DataDir: filepath.Join(r.dir, "server"),
		RootUsername: r.cfg.Username, RootPassword: r.cfg.Password, PasswordIterations: 1000,
		Fsync: server.FsyncInterval, WriteFault: r.fault.write, ReplyDelay: r.fault.request,
	})
	if err != nil {
		return fmt.Errorf("conformance: embedded server: %w", err)
	}
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("conformance: embedded server: %w", err)
	}
	if err := s.Ready(ctx); err != nil {
		return fmt.Errorf("conformance: embedded server: %w", err)
	}
	r.server = s
	r.addr = s.Addr()
	return nil
}

// restartServer closes the embedded server (every connection drops) and starts it again
// on the same address and data directory.
func (r *Runner) restartServer(ctx context.Context) error {
	if r.server == nil {
		return errors.New("needs the embedded server (not --server)")
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.server.Close(cctx); err != nil {
		return fmt.Errorf("conformance: closing the embedded server: %w", err)
	}
	r.server = nil
	return r.startEmbedded(ctx, r.addr)
}

func (r *Runner) close() {
	if r.admin != nil {
		_ = r.admin.Close()
	}
	if r.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.server.Close(ctx)
	}
}
