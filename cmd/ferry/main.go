// Command ferry is the single Ferry binary: the connectors runtime, the embedded
// Iggy-compatible server and the operator tools.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	stop := startCPUProfile()
	code := run(os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes the CLI and returns the process exit code.
func run(args []string) int {
	root := &cobra.Command{
		Use:           "ferry",
		Short:         "Ferry: a connectors runtime for Apache Iggy with delivery you can trust",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(), // --version
	}
	root.SetVersionTemplate(versionLine())
	root.AddCommand(
		newRunCmd(),
		newServerCmd(),
		newCheckCmd(),
		newConnectorsCmd(),
		newOffsetsCmd(),
		newBenchCmd(),
		newVersionCmd(),
		newStatusCmd(),
		newConformanceCmd(),
	)
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
