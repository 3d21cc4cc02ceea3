package ferrycli

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ferryio/ferry/connect"
)

// catchHUP makes SIGHUP a reload request from now on: without it the signal ends the
// process (exit 129), which a service manager's reload (ExecReload) must not do. Call the
// returned function to stop catching.
func catchHUP() (<-chan os.Signal, func()) {
	hups := make(chan os.Signal, 1) // a SIGHUP during a reload asks for one more
	signal.Notify(hups, syscall.SIGHUP)
	return hups, func() { signal.Stop(hups) }
}

// reloadOnHUP reloads rt's connector files at each SIGHUP on hups until ctx ends (the
// stop signal) or the returned function is called; each reload's connector stops are
// bounded by stopTimeout. The returned function waits for a reload in progress and ends
// the goroutine.
func reloadOnHUP(ctx context.Context, hups <-chan os.Signal, rt *connect.Runtime, stopTimeout time.Duration, log *slog.Logger) (stop func()) {
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hups:
			}
			log.Info("SIGHUP: reloading the connector files")
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
			if _, err := rt.Reload(rctx); err != nil {
				log.Error("reload failed; the running connectors are unchanged where it stopped", "error", err)
			}
			cancel()
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
