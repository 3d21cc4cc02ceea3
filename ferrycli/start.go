package ferrycli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/httpapi"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/server"
)

// startOptions are what decides what `ferry run` checks at start (its flags); `ferry check`
// passes its own.
type startOptions struct {
	ctx          context.Context // bounds reading the configs (a remote provider); nil = Background
	logTo        io.Writer       // where the logs go; nil = nowhere
	logLevel     string          // "" = info
	config       string
	createDir    bool          // run: a missing config_dir is created; check: it is reported
	embedded     bool          // --embedded; [embedded] enabled = true counts as well
	data         string        // --data
	embeddedAddr string        // --embedded-addr
	initData     bool          // --init
	builtins     *sdk.Registry // check: the Go connectors; nil: connectors.Registry()
}

// startPlan is what prepareStart read and checked.
type startPlan struct {
	rc       *config.Runtime
	conns    *config.Connectors
	embedded *server.Config // nil: no embedded server
	log      *slog.Logger   // in [logging] format, to startOptions.logTo
	// store is where the configs came from; closeStore ends its requests (call it once
	// the runtime has stopped).
	store      configStore
	closeStore func()
}

// prepareStart reads the .env file, the runtime config and the connector files, and checks
// everything process-wide that `ferry run` refuses at start, before anything listens or
// connects: the [iggy] credentials and TLS CA file, the [http] section (a non-loopback
// address without an api_key, TLS files, CORS, the metrics endpoint), and with an embedded
// server its [embedded] limits and credentials. `ferry check` calls it too, so that check
// refuses what run refuses, with the same message.
//
// A connector's own mistakes are not refused here: a connector file that does not load is in
// conns.Invalid, and what connect.CheckSink/CheckSource find is found again by the runtime at
// the connector's start; run isolates both (that connector is in error, the others run),
// check reports them and fails.
func prepareStart(o startOptions) (_ *startPlan, err error) {
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	logTo := o.logTo
	if logTo == nil {
		logTo = io.Discard
	}
	plan, err := loadConfig(ctx, o.config, o.createDir, func(rc *config.Runtime) (*slog.Logger, error) {
		return newLogger(logTo, rc.Logging.Format, o.logLevel)
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			plan.closeStore()
		}
	}()
	rc := plan.rc
	if _, err := clientOptions(rc.Iggy, slog.New(slog.DiscardHandler)); err != nil {
		return nil, err
	}
	if rc.HTTP.Enabled {
		if err := httpapi.Validate(rc.HTTP); err != nil {
			return nil, err
		}
	}
	if o.embedded || rc.Embedded.Enabled {
		if o.embeddedAddr != "" {
			rc.Embedded.Address = o.embeddedAddr
		}
		cfg, err := embeddedConfig(rc, o.data, o.initData, slog.New(slog.DiscardHandler))
		if err != nil {
			return nil, err
		}
		if _, err := server.New(cfg); err != nil { // checks only: nothing is opened
			return nil, fmt.Errorf("embedded server: %w", err)
		}
		plan.embedded = &cfg
	}
	return plan, nil
}

// embeddedPasswordIterations is the PBKDF2 cost of the embedded server's new password
// hashes; 0, always outside tests, is the server's default. This package's tests lower it
// (TestMain): under -race on a loaded machine one hash at the default cost took up to 14 s,
// past the server's 10 s login timeout, so the runtime's login to its own embedded server
// was cut.
var embeddedPasswordIterations int

// embeddedConfig is the embedded server's configuration for `run --embedded`: listening on
// [embedded] address (default iggy.address, its first entry if it lists several), data in
// dataDir (default [embedded] data_dir, else "ferry_data"), with the [iggy] credentials as
// root user (applied on the first boot of the data directory).
func embeddedConfig(rc *config.Runtime, dataDir string, initDir bool, log *slog.Logger) (server.Config, error) {
	addr := rc.Embedded.Address
	if addr == "" {
		addr, _, _ = strings.Cut(rc.Iggy.Address, ",") // the first seed
		addr = strings.TrimSpace(addr)
	}
	if dataDir == "" {
		dataDir = rc.Embedded.DataDir
	}
	if dataDir == "" {
		dataDir = "ferry_data"
	}
	cfg := server.Config{Addr: addr, DataDir: dataDir, Logger: log.With("component", "server"),
		RootUsername: rc.Iggy.Username, RootPassword: rc.Iggy.Password.Reveal(), InitDataDir: initDir,
		PasswordIterations: embeddedPasswordIterations}
	if rc.Iggy.DefaultPassword {
		// The config layer's built-in "iggy" is no choice of the user's: leave it to
		// the server, which allows it on a loopback address only.
		cfg.RootPassword = ""
	}
	if err := applyEmbeddedLimits(rc.Embedded, &cfg); err != nil {
		return server.Config{}, err
	}
	return cfg, nil
}
