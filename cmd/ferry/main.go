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
	os.Exit(run(os.Args[1:]))
}

// run executes the CLI and returns the process exit code.
func run(args []string) int {
	root := &cobra.Command{
		Use:           "ferry",
		Short:         "Ferry: a connectors runtime for Apache Iggy with delivery you can trust",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
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
	// whatever the graceful stop is waiting for.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	finished := make(chan struct{})
	defer close(finished)
	go watchSignals(sigs, cancel, finished, func() {
		fmt.Fprintln(os.Stderr, "ferry: second signal, exiting now")
		os.Exit(130)
	})

	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "ferry:", err)
		return 1
	}
	return 0
}

// watchSignals cancels at the first signal and calls exit at the second; it ends when
// finished is closed.
func watchSignals(sigs <-chan os.Signal, cancel context.CancelFunc, finished <-chan struct{}, exit func()) {
	select {
	case <-sigs:
		cancel()
	case <-finished:
		return
	}
	select {
	case <-sigs:
		exit()
	case <-finished:
	}
}
