package ferrycli

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestWatchSignals: the first stop signal cancels; a repeat of it within sameStopWindow
// is the same request (timeout(1) signals the process and then its group); a different
// signal, or the same one after the window, exits at once.
func TestWatchSignals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		sigs   []os.Signal
		exit   os.Signal // nil: no exit
	}{
		{"one signal", time.Hour, []os.Signal{syscall.SIGTERM}, nil},
		{"the same signal twice at once (timeout)", time.Hour, []os.Signal{syscall.SIGTERM, syscall.SIGTERM}, nil},
		{"SIGTERM then SIGINT", time.Hour, []os.Signal{syscall.SIGTERM, os.Interrupt}, os.Interrupt},
		{"SIGINT then SIGTERM", time.Hour, []os.Signal{os.Interrupt, syscall.SIGTERM}, syscall.SIGTERM},
		{"the same signal after the window", 0, []os.Signal{os.Interrupt, os.Interrupt}, os.Interrupt},
		{"a third, different signal", time.Hour, []os.Signal{syscall.SIGTERM, syscall.SIGTERM, os.Interrupt}, os.Interrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := sameStopWindow
			sameStopWindow = tc.window
			defer func() { sameStopWindow = old }()
			sigs := make(chan os.Signal)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			finished, ended := make(chan struct{}), make(chan struct{})
			exited := make(chan os.Signal, 1)
			go func() {
				defer close(ended)
				watchSignals(sigs, func(os.Signal) { cancel() }, finished, func(s os.Signal) { exited <- s })
			}()
			for _, s := range tc.sigs {
				sigs <- s // unbuffered: the watcher took it
			}
			// Judged once the watcher has returned: a send completes when the watcher took
			// the signal, before it called cancel.
			if tc.exit != nil {
				if got := <-exited; got != tc.exit {
					t.Fatalf("exit on %v, want %v", got, tc.exit)
				}
				<-ended
			} else {
				close(finished)
				<-ended
			}
			if ctx.Err() == nil {
				t.Fatal("the first signal did not cancel")
			}
			if tc.exit != nil {
				return
			}
			select {
			case s := <-exited:
				t.Fatalf("exit on %v: the repeat was taken as a second request", s)
			default:
			}
		})
	}
}
