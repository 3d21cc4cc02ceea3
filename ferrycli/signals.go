package ferrycli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// sameStopWindow is how long after the first stop signal a repeat of the same signal is
// taken as the same request. `timeout` (without --foreground) sends its signal to the
// command and then to the command's whole process group, and a service manager may do
// alike: one stop reaches the process twice, microseconds apart. An operator's second
// Ctrl-C, or a different signal at any time, is a second request.
var sameStopWindow = time.Second

// stopSignal is the cause of the command's context when a stop signal cancelled it.
type stopSignal struct{ sig os.Signal }

func (s stopSignal) Error() string { return "received " + signalName(s.sig) }

// signalName is a signal as the shutdown line names it: SIGINT, SIGTERM.
func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// shutdownLine is the line that begins a graceful stop, in the words of Iggy's runtime
// ("Received SIGTERM. Shutting down connectors runtime..."), which operators match on; a
// stop of Ferry's own (--duration, idle, every connector failed) gives its reason instead.
func shutdownLine(ctx context.Context, reason string) string {
	var s stopSignal
	if reason == "signal" && errors.As(context.Cause(ctx), &s) {
		return "Received " + signalName(s.sig) + ". Shutting down connectors runtime..."
	}
	return "Stopping (" + reason + "). Shutting down connectors runtime..."
}

// watchSignals calls cancel at the first stop signal and exit at the second; a repeat of
// the first signal within sameStopWindow is the same request, not a second one. It ends
// when finished is closed.
func watchSignals(sigs <-chan os.Signal, cancel func(os.Signal), finished <-chan struct{}, exit func(os.Signal)) {
	var first os.Signal
	select {
	case first = <-sigs:
		cancel(first)
	case <-finished:
		return
	}
	at := time.Now()
	for {
		select {
		case sig := <-sigs:
			if sig == first && time.Since(at) < sameStopWindow {
				fmt.Fprintf(os.Stderr, "ferry: %v again within %s of the first: the same stop request\n", sig, sameStopWindow)
				continue
			}
			exit(sig)
			return
		case <-finished:
			return
		}
	}
}
