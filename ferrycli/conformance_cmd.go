package ferrycli

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/conformance"
)

type conformanceFlags struct {
	runtime    string
	runtimeEnv []string
	server     string
	modes      []string
	scenarios  []string
	report     string
	soak       int
	postgres   string
	pgPlugin   string
	s3         string
	kafka      []string
	iceberg    string
	seed       int64
	timeout    time.Duration
	workDir    string
	verbose    bool
}

func newConformanceCmd() *cobra.Command {
	var f conformanceFlags
	var list strings.Builder
	for _, s := range conformance.Scenarios() {
		fmt.Fprintf(&list, "  %-18s %s\n", s.Name, s.About)
	}
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Check a connectors runtime's delivery guarantees with black-box scenarios",
		Long: `Conformance runs the delivery conformance suite against a connectors runtime: any
program that reads Iggy's runtime config file and connector files and loads Iggy's native
plugins (Ferry by default, or Iggy's own runtime). For each scenario and commit mode it
writes the config files, starts the runtime as a child process, produces messages with
Ferry's client, crashes, stops or disturbs the runtime as the scenario says, and judges
from what a probe sink plugin recorded (compiled on the fly with the system's C compiler:
cc, gcc or $CC) and from the consumer group's offsets stored in the server. The source-*
scenarios load a probe source instead (Iggy's batch-result source ABI), run once each with
the mode "source", and judge from its record and from the topic read back. It prints
scenario · mode · expected · observed · verdict per line, and exits 1 when any verdict is
"fail". A runtime that refuses a mode (exits before opening the plugin) gets "not
supported". postgres-soak (with --soak N and --postgres URL) runs a PostgreSQL sink
(--postgres-plugin, default builtin:postgres) into a table of its own and judges from the
table: every message exactly once. s3-soak (with --soak N and --s3 URL, sink_controlled
only) runs Ferry's S3 sink into a bucket of its own and judges from the objects. kafka-soak
(with --soak N and --kafka HOST:PORT, sink_controlled only) runs Ferry's Kafka sink into a
topic of its own and judges from the topic, read read_committed. iceberg-soak (with --soak N
and --iceberg URL, sink_controlled only) runs Ferry's Iceberg sink into a table of its own
(a SQL catalog on that PostgreSQL database, a local warehouse) and judges from the table.

Scenarios:
` + list.String(),
		Example: `  ferry conformance
  ferry conformance --soak 20 --report report.md
  ferry conformance --soak 20 --scenarios postgres-soak --postgres postgres://user@localhost:5432/db
  ferry conformance --modes after_polling --runtime-env IGGY_CONNECTORS_CONFIG_PATH={config} --runtime /path/to/iggy-connectors`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runConformance(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.runtime, "runtime", "", `command that starts the runtime under test, split at spaces (no quoting: wrap a command whose arguments hold spaces in a script); {config} is replaced by the path of the config file the suite wrote (default: this ferry binary "run --config {config}")`)
	fl.StringArrayVar(&f.runtimeEnv, "runtime-env", nil, "KEY=VALUE added to the runtime's environment, {config} replaced (repeatable), e.g. IGGY_CONNECTORS_CONFIG_PATH={config}")
	fl.StringVar(&f.server, "server", "", "address of an Iggy server with root credentials iggy/iggy to use (default: an embedded server on a free loopback port)")
	fl.StringSliceVar(&f.modes, "modes", conformance.AllModes, "commit modes to check (offset_commit values; after_polling is written as no offset_commit field at all)")
	fl.StringSliceVar(&f.scenarios, "scenarios", nil, "run only these scenarios (default all)")
	fl.StringVar(&f.report, "report", "", "also write the results to this file: Markdown for .md, JSON for .json")
	fl.IntVar(&f.soak, "soak", 0, "SIGKILL the runtime this many times at random moments in the soak scenario, per mode (0 skips the soak)")
	fl.StringVar(&f.postgres, "postgres", "", "PostgreSQL URL for the postgres-soak scenario (a table of its own per run, dropped at the end; without it the scenario is \"not supported\")")
	fl.StringVar(&f.pgPlugin, "postgres-plugin", "builtin:postgres", "path of the PostgreSQL sink plugin in the connector file of postgres-soak (another runtime: its PostgreSQL sink plugin, which takes the official sink's plugin_config keys)")
	fl.StringVar(&f.s3, "s3", "", "S3-compatible server for the s3-soak scenario, http://ACCESS:SECRET@host:port[?region=R] (without ACCESS:SECRET, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; a bucket of its own per run, removed at the end; without it the scenario is \"not supported\")")
	fl.StringSliceVar(&f.kafka, "kafka", nil, "Kafka bootstrap servers (HOST:PORT, comma separated) for the kafka-soak scenario (a topic of its own per run, deleted at the end; without it the scenario is \"not supported\")")
	fl.StringVar(&f.iceberg, "iceberg", "", "PostgreSQL URL of the SQL catalog for the iceberg-soak scenario (a catalog and table of its own per run, the data in the work directory, the table dropped at the end; without it the scenario is \"not supported\")")
	fl.Int64Var(&f.seed, "seed", 1, "seed of the random kill moments and proxy faults (the same seed repeats the same chaos)")
	fl.DurationVar(&f.timeout, "timeout", 60*time.Second, "bound on each wait of a scenario (a runtime that stalls fails the scenario after it)")
	fl.StringVar(&f.workDir, "work-dir", "", "keep config files, probe records and runtime logs in this directory (default: a temporary directory, removed)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log progress to stderr")
	return cmd
}

func runConformance(cmd *cobra.Command, f conformanceFlags) error {
	var runtime []string
	if f.runtime == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("conformance: locating this binary: %w", err)
		}
		runtime = []string{self, "run", "--config", "{config}"}
	} else {
		if runtime = strings.Fields(f.runtime); len(runtime) == 0 {
			return fmt.Errorf("--runtime %q: not a command", f.runtime)
		}
	}
	for _, e := range f.runtimeEnv {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return fmt.Errorf("--runtime-env %q: want KEY=VALUE", e)
		}
	}
	format := ""
	if f.report != "" {
		switch strings.ToLower(filepath.Ext(f.report)) {
		case ".md":
			format = "md"
		case ".json":
			format = "json"
		default:
			return fmt.Errorf("--report %q: the name must end in .md or .json", f.report)
		}
	}
	if f.soak < 0 {
		return errors.New("--soak: must be 0 or more")
	}
	if f.postgres != "" && f.soak == 0 {
		return errors.New("--postgres: postgres-soak needs --soak N (the number of SIGKILLs per mode)")
	}
	var s3 *conformance.S3Target
	if f.s3 != "" {
		if f.soak == 0 {
			return errors.New("--s3: s3-soak needs --soak N (the number of SIGKILLs)")
		}
		t, err := conformance.ParseS3Target(f.s3)
		if err != nil {
			return fmt.Errorf("--s3: %w", err)
		}
		s3 = &t
	}
	if f.iceberg != "" && f.soak == 0 {
		return errors.New("--iceberg: iceberg-soak needs --soak N (the number of SIGKILLs)")
	}
	if len(f.kafka) > 0 && f.soak == 0 {
		return errors.New("--kafka: kafka-soak needs --soak N (the number of SIGKILLs)")
	}
	if f.pgPlugin == "" {
		return errors.New("--postgres-plugin: must name the PostgreSQL sink plugin (default builtin:postgres)")
	}
	log := slog.New(slog.DiscardHandler)
	if f.verbose {
		log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	}
	out := cmd.OutOrStdout()
	results, err := conformance.Run(cmd.Context(), conformance.Config{
		Runtime: runtime, RuntimeEnv: f.runtimeEnv, Server: f.server, ServerCommand: serverCommand(), Modes: f.modes, Scenarios: f.scenarios,
		Soak: f.soak, Postgres: f.postgres, PostgresPlugin: f.pgPlugin, S3: s3, Kafka: f.kafka, Iceberg: f.iceberg, Seed: f.seed, Timeout: f.timeout, WorkDir: f.workDir, Keep: f.workDir != "", Logger: log,
		OnResult: func(r conformance.Result) { fmt.Fprintln(out, conformance.Line(r)) },
	})
	if err != nil {
		return err
	}
	if format != "" {
		var b bytes.Buffer
		name := strings.Join(runtime, " ")
		if format == "md" {
			err = conformance.WriteMarkdown(&b, name, results)
		} else {
			err = conformance.WriteJSON(&b, name, results)
		}
		if err == nil {
			err = os.WriteFile(f.report, b.Bytes(), 0o644)
		}
		if err != nil {
			return fmt.Errorf("--report %s: %w", f.report, err)
		}
	}
	if !conformance.Passed(results) {
		return errors.New("conformance: some scenarios failed")
	}
	return nil
}

// serverCommand is this binary's embedded server, run as a child process by the
// server-sigkill scenario; nil (the scenario is "not supported") when the binary cannot
// be located.
func serverCommand() []string {
	self, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{self, "server", "--addr", "{addr}", "--data", "{data}"}
}
