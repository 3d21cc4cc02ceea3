package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// sameStopWindow is how long after the first stop signal a repeat of the same signal is
// taken as the same request. `timeout` (without --foreground) sends its signal to the
// command and then to the command's whole process group, and a service manager may do
// alike: one stop reaches the process twice, microseconds apart. An operator's second
// Ctrl-C, or a different signal at any time, is a second request.
var sameStopWindow = time.Second

// watchSignals cancels at the first stop signal and calls exit at the second; a repeat of
// the first signal within sameStopWindow is the same request, not a second one. It ends
// when finished is closed.
func watchSignals(sigs <-chan os.Signal, cancel context.CancelFunc, finished <-chan struct{}, exit func(os.Signal)) {
	var first os.Signal
	select {
	case first = <-sigs:
		cancel()
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
