package ferrycli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/sdk"
)

// CLI is the ferry command line with the Go connectors it knows: the built-ins of
// [connectors.Registry] and those added with [CLI.AddSink] and [CLI.AddSource]. Fill it
// before [CLI.Run]; it is not safe for concurrent use.
type CLI struct {
	reg     *sdk.Registry
	version string
}

// New returns the ferry command line with the built-in connectors only, the one
// cmd/ferry runs.
func New() *CLI {
	return &CLI{reg: connectors.Registry()}
}

// ErrDuplicate is wrapped by the error [CLI.AddSink] and [CLI.AddSource] return for a name
// already taken by a connector of the same kind (a built-in or one added before).
var ErrDuplicate = errors.New("connector name already registered")

// nameRE is what a connector name may be: it is written in a connector file as
// path = "builtin:NAME" and printed in tables and log lines, so no spaces, quotes or
// separators.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// AddSink registers a Go sink: a connector file with type = "sink" and
// path = "builtin:NAME" runs a sink made by f. spec declares its plugin_config (the fields
// `ferry check` validates and `ferry connectors` prints; sdk.ConfigSpec{AnyFields: true}
// for a sink that reads none). It returns an error, and registers nothing, when name is
// not lower-case letters, digits, '_', '.' or '-' (starting with a letter or digit), when f
// is nil, when a sink of that name exists (wrapping [ErrDuplicate]), or when spec
// contradicts itself (sdk.ConfigSpec.CheckSinkSpec: a sink that declares
// sdk.CommitsNever but lists "sink_controlled" among its CommitModes). spec.Commits says
// when the sink commits under sink_controlled; leave it unset and `ferry connectors` says
// "not declared".
func (c *CLI) AddSink(name string, f sdk.SinkFactory, spec sdk.ConfigSpec) error {
	if err := c.checkNew("sink", name, f == nil, c.reg.SinkNames()); err != nil {
		return err
	}
	if err := spec.CheckSinkSpec(); err != nil {
		return fmt.Errorf("ferrycli: sink %q: %w", name, err)
	}
	c.reg.AddSink(name, f, spec)
	return nil
}

// AddSource registers a Go source under path = "builtin:NAME", with the same rules and
// errors as [CLI.AddSink]. A source and a sink may share a name.
func (c *CLI) AddSource(name string, f sdk.SourceFactory, spec sdk.ConfigSpec) error {
	if err := c.checkNew("source", name, f == nil, c.reg.SourceNames()); err != nil {
		return err
	}
	c.reg.AddSource(name, f, spec)
	return nil
}

func (c *CLI) checkNew(kind, name string, nilFactory bool, taken []string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("ferrycli: %s name %q: want lower-case letters, digits, '_', '.' or '-', starting with a letter or digit", kind, name)
	}
	if nilFactory {
		return fmt.Errorf("ferrycli: %s %q: nil factory", kind, name)
	}
	for _, t := range taken {
		if t == name {
			return fmt.Errorf("ferrycli: %s %q (path = \"builtin:%s\"): %w", kind, name, name, ErrDuplicate)
		}
	}
	return nil
}

// SetVersion sets the version `ferry version` and `ferry --version` print and the HTTP
// API reports. Default: the VERSION file of the Ferry module the program was built with.
func (c *CLI) SetVersion(v string) { c.version = v }

// Run executes the command line args (without the program name: os.Args[1:]) and returns
// the process exit code: 0 on success, 1 on an error (printed to stderr as "ferry: …").
// It handles SIGINT and SIGTERM while it runs: the first cancels the command (ferry run
// stops gracefully), a second one exits the process at once with code 130. Every command of
// the ferry binary is there: run, server, check, connectors, offsets, status, bench,
// conformance, version; run, check and connectors know the connectors added to c.
func (c *CLI) Run(args []string) int {
	root := c.command()
	root.SetArgs(args)

	// The first SIGINT/SIGTERM cancels ctx (graceful stop); a second one exits at once,
	// whatever the graceful stop is waiting for (signals.go). SIGHUP is run's reload.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	finished := make(chan struct{})
	defer close(finished)
	go watchSignals(sigs, func(sig os.Signal) { cancel(stopSignal{sig}) }, finished, func(sig os.Signal) {
		fmt.Fprintf(os.Stderr, "ferry: second signal (%v), exiting now\n", sig)
		os.Exit(130)
	})

	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "ferry:", err)
		return 1
	}
	return 0
}

// Main runs the command line of the process (os.Args) and exits with its code: the whole
// body of a main function. It collects garbage at GOGC 400 unless GOGC is set (gc.go). With
// FERRY_CPU_PROFILE set it writes a CPU profile of the run there (docs/benchmarks.md).
func (c *CLI) Main() {
	tuneGC(os.LookupEnv)
	stop := startCPUProfile()
	code := c.Run(os.Args[1:])
	stop()
	os.Exit(code)
}

// command builds the cobra tree; every subcommand that builds connectors gets c's registry.
func (c *CLI) command() *cobra.Command {
	version := c.versionString()
	root := &cobra.Command{
		Use:           "ferry",
		Short:         "Ferry: a connectors runtime for Apache Iggy with delivery you can trust",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version, // --version
	}
	root.SetVersionTemplate(versionLine(version))
	root.AddCommand(
		newRunCmd(c.reg, version),
		newServerCmd(),
		newCheckCmd(c.reg),
		newConnectorsCmd(c.reg),
		newOffsetsCmd(),
		newBenchCmd(),
		newVersionCmd(version),
		newStatusCmd(),
		newConformanceCmd(),
		newStreamCmd(),
		newTopicCmd(),
		newProduceCmd(),
		newConsumeCmd(),
	)
	root.AddCommand(newControlCmds()...)
	root.AddCommand(newHealthCmd())
	return root
}
