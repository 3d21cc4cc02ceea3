package ferrycli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/server"
)

// newServerCmd builds `ferry server`: the embedded Iggy-compatible server, stopped
// gracefully when the command's context is cancelled (SIGINT/SIGTERM in main).
func newServerCmd() *cobra.Command {
	var (
		addr, data, fsync, user, pass, logLevel string
		diskReserve                             string
		fsyncInterval                           time.Duration
		limits                                  server.Config
		initDir                                 bool
	)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the embedded single-node Iggy-compatible server",
		Long: `Run Ferry's embedded Iggy server (binary protocol of Iggy 0.9).

Flags fall back to environment variables: FERRY_SERVER_ADDR, FERRY_SERVER_DATA,
FERRY_SERVER_FSYNC, FERRY_ROOT_USERNAME (or IGGY_ROOT_USERNAME) and
FERRY_ROOT_PASSWORD (or IGGY_ROOT_PASSWORD). The root credentials default to
iggy/iggy on a loopback address only; off loopback the server refuses to start
without an explicit password other than "iggy". Credentials given on a data dir
that already has a root user replace that user's username and password.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl := cmd.Flags()
			envDefault := func(flag string, dst *string, keys ...string) {
				if fl.Changed(flag) {
					return
				}
				for _, k := range keys {
					if v := os.Getenv(k); v != "" {
						*dst = v
						return
					}
				}
			}
			envDefault("addr", &addr, "FERRY_SERVER_ADDR")
			envDefault("data", &data, "FERRY_SERVER_DATA")
			envDefault("fsync", &fsync, "FERRY_SERVER_FSYNC")
			envDefault("root-username", &user, "FERRY_ROOT_USERNAME", "IGGY_ROOT_USERNAME")
			envDefault("root-password", &pass, "FERRY_ROOT_PASSWORD", "IGGY_ROOT_PASSWORD")
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("server: --log-level: %w", err)
			}
			reserve, err := parseDiskReserve(diskReserve)
			if err != nil {
				return fmt.Errorf("server: --disk-reserve: %w", err)
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			return runServer(cmd.Context(), server.Config{
				Addr: addr, DataDir: data, Fsync: fsync, FsyncInterval: fsyncInterval,
				RootUsername: user, RootPassword: pass, Logger: logger,
				MaxConnections: limits.MaxConnections, MaxConnectionsPerIP: limits.MaxConnectionsPerIP,
				LoginTimeout: limits.LoginTimeout, FrameReadTimeout: limits.FrameReadTimeout,
				MaxPendingBytes: limits.MaxPendingBytes, MaxConcurrentLogins: limits.MaxConcurrentLogins,
				MaxReplyBytes: limits.MaxReplyBytes, MaxPartitionsPerTopic: limits.MaxPartitionsPerTopic,
				MaxPartitions: limits.MaxPartitions, MaxLoginsPerIP: limits.MaxLoginsPerIP,
				DiskReserve: reserve, InitDataDir: initDir,
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", server.DefaultAddr, "TCP listen address (env FERRY_SERVER_ADDR)")
	f.StringVar(&data, "data", "ferry_data", "data directory (env FERRY_SERVER_DATA); the same default as ferry run --embedded")
	f.StringVar(&fsync, "fsync", server.FsyncAlways, "fsync policy: always|interval (env FERRY_SERVER_FSYNC)")
	f.DurationVar(&fsyncInterval, "fsync-interval", server.DefaultFsyncInterval, "sync period with --fsync interval")
	f.StringVar(&user, "root-username", "", "root username (env FERRY_ROOT_USERNAME, IGGY_ROOT_USERNAME; default iggy)")
	f.StringVar(&pass, "root-password", "", "root password, replacing an existing root user's (env FERRY_ROOT_PASSWORD, IGGY_ROOT_PASSWORD; default iggy on loopback only)")
	f.IntVar(&limits.MaxConnections, "max-connections", server.DefaultMaxConnections, "maximum concurrent client connections")
	f.IntVar(&limits.MaxConnectionsPerIP, "max-connections-per-ip", server.DefaultMaxConnectionsPerIP, "maximum concurrent connections from one client IP address")
	f.DurationVar(&limits.LoginTimeout, "login-timeout", server.DefaultLoginTimeout, "time a new connection has to log in")
	f.DurationVar(&limits.FrameReadTimeout, "frame-read-timeout", server.DefaultFrameReadTimeout, "time to finish sending a started request frame")
	f.Int64Var(&limits.MaxPendingBytes, "max-pending-bytes", server.DefaultMaxPendingBytes, "bytes buffered at most, over all connections, for request frames still arriving")
	f.Int64Var(&limits.MaxReplyBytes, "max-reply-bytes", server.DefaultMaxReplyBytes, "bytes held at most, over all connections, by poll replies being built or written; polls wait beyond it")
	f.IntVar(&limits.MaxPartitionsPerTopic, "max-partitions-per-topic", server.DefaultMaxPartitionsPerTopic, "partitions one topic may have (more is refused with 2015 TooManyPartitions)")
	f.IntVar(&limits.MaxPartitions, "max-partitions", server.DefaultMaxPartitions, "partitions all topics together may have (more is refused with 2015 TooManyPartitions)")
	f.IntVar(&limits.MaxConcurrentLogins, "max-concurrent-logins", 0, "password checks run at once (0: half the CPUs, at least 1); client addresses take turns")
	f.IntVar(&limits.MaxLoginsPerIP, "max-logins-per-ip", server.DefaultMaxLoginsPerIP, "password checks of one client IP address running or waiting at once; more are refused at once")
	f.StringVar(&diskReserve, "disk-reserve", "64MiB", "space kept free in the data dir (FERRY.RESERVE) and given up on a full disk, so writes are refused (4006) instead of failing midway; 0 turns it off (see docs/security.md)")
	f.BoolVar(&initDir, "init", false, "start with an empty data dir even where a server stored data before (the dir is missing)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug|info|warn|error")
	return cmd
}

func runServer(ctx context.Context, cfg server.Config) error {
	s, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	cfg.Logger.Info("stopping server")
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Close(closeCtx)
}
