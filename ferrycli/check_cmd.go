package ferrycli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/sdk"
)

func newCheckCmd(builtins *sdk.Registry) *cobra.Command {
	o := startOptions{builtins: builtins}
	var withConnect bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate a config.toml, its connector files and their plugins without connecting",
		Long: `Check refuses everything ferry run refuses at start, with the same message: the runtime
config (errors name file:line: key), the [iggy] credentials and TLS CA file, the [http]
section (a non-loopback address needs an api_key; TLS files, CORS, the metrics endpoint),
and with --embedded (or [embedded] enabled) the embedded server's settings. Then it checks
every connector as run does before opening it: its file must load, built-ins must exist
and accept their plugin_config, native libraries are dlopened and their ABI symbols checked
(a sink_controlled sink needs iggy_sink_set_commit_callback), and a source's state file must
be readable. It prints one line per connector and exits non-zero on any problem: run would
refuse to start on the first kind, and run every other connector beside one with the second
(docs/iggy-compatibility.md). Nothing is sent to Iggy, nothing listens, nothing is created.

With --connect it also connects to the systems of the built-in connectors that can check
them (the PostgreSQL CDC source: wal_level = logical, the REPLICATION right, each table's
replica identity, an existing slot's plugin) and prints each problem with the SQL that
fixes it; still nothing is created.`,
		Example: `  ferry check --config examples/quickstart/config.toml
  ferry check --config config.toml --connect`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.ctx, o.logTo, o.logLevel = cmd.Context(), cmd.ErrOrStderr(), "warn"
			return checkWith(cmd.OutOrStdout(), o, withConnect)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.config, "config", envString(envConfig, ""), "runtime config.toml [FERRY_CONFIG]")
	fl.BoolVar(&o.embedded, "embedded", envBool(envEmbedded, false), "check as ferry run --embedded would [FERRY_EMBEDDED]")
	fl.StringVar(&o.data, "data", envString(envData, ""), "as ferry run --data [FERRY_DATA]")
	fl.StringVar(&o.embeddedAddr, "embedded-addr", "", "as ferry run --embedded-addr")
	fl.BoolVar(&withConnect, "connect", false, "also connect to the built-in connectors' systems and check their setup (PostgreSQL CDC: wal_level, REPLICATION, replica identity)")
	return cmd
}

// checkOptions are the runtime options `ferry run` builds its connectors with.
func checkOptions(rc *config.Runtime, builtins *sdk.Registry) connect.Options {
	return connect.Options{Runtime: rc, Builtins: orBuiltins(builtins),
		LoadSinkPlugin: connect.NativeSinkLoader, LoadSourcePlugin: connect.NativeSourceLoader}
}

// check runs prepareStart as `ferry run` does (without creating config_dir), then checks
// every connector with what the runtime checks before opening it.
func check(w io.Writer, o startOptions) error { return checkWith(w, o, false) }

// checkWith is check; with connectCheck it also runs the built-ins' sdk.Preflighter.
func checkWith(w io.Writer, o startOptions, connectCheck bool) error {
	o.createDir = false
	plan, err := prepareStart(o)
	if err != nil {
		return err
	}
	defer plan.closeStore()
	rc, conns := plan.rc, plan.conns
	fmt.Fprintf(w, "config %s: ok (iggy %s, %s, state %s)\n", rc.Path, rc.Iggy.Address, configSource(rc), rc.State.Path)
	for _, warn := range append(append([]string(nil), rc.Warnings...), conns.Warnings...) {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	opts := checkOptions(rc, o.builtins)
	bad := 0
	for _, s := range conns.Sources {
		detail := "last [[streams]]: none"
		if n := len(s.Streams); n > 0 {
			st := s.Streams[n-1]
			detail = fmt.Sprintf("→ %s/%s schema=%s", st.Stream, st.Topic, st.Schema)
			if n > 1 {
				detail += fmt.Sprintf(" (%d [[streams]] entries: only the last is used)", n)
			}
		}
		err := connect.CheckSource(opts, s)
		if err == nil && connectCheck && s.Enabled {
			err = preflight(opts.Builtins, s.Path, s.PluginConfig, true)
		}
		bad += report(w, "source", &s.Common, detail, err)
	}
	for _, s := range conns.Sinks {
		mode, builtinMode := connect.SinkCommitMode(opts, s)
		detail := fmt.Sprintf("offset_commit=%s on_failure=%s", mode, s.OnFailure)
		if builtinMode {
			detail = fmt.Sprintf("offset_commit=%s (not set: the only mode of %s) on_failure=%s", mode, s.Path, s.OnFailure)
		}
		for _, st := range s.Streams {
			detail += fmt.Sprintf(" ← %s/%v", st.Stream, st.Topics)
		}
		err := connect.CheckSink(opts, s)
		if err == nil && connectCheck && s.Enabled {
			err = preflight(opts.Builtins, s.Path, s.PluginConfig, false)
		}
		bad += report(w, "sink", &s.Common, detail, err)
	}
	for _, inv := range conns.Invalid {
		c := config.Common{Key: inv.Key, Path: "-", Enabled: inv.Enabled}
		bad += report(w, string(inv.Type), &c, fmt.Sprintf("version %d", inv.Version), inv.Err)
	}
	if bad > 0 {
		return fmt.Errorf("check: %d connector(s) with problems", bad)
	}
	return nil
}

// orBuiltins is reg, or the built-in connectors when reg is nil (a test's options).
func orBuiltins(reg *sdk.Registry) *sdk.Registry {
	if reg == nil {
		return connectors.Registry()
	}
	return reg
}

// preflightTimeout bounds one connector's --connect check.
const preflightTimeout = 15 * time.Second

// preflight runs a built-in connector's sdk.Preflighter, if it has one: its problems
// joined, one per line.
func preflight(reg *sdk.Registry, path string, pluginConfig []byte, source bool) error {
	name, ok := strings.CutPrefix(path, "builtin:")
	if !ok {
		return nil
	}
	var inst any
	if source {
		if f, ok := reg.Source(name); ok {
			inst = f()
		}
	} else if f, ok := reg.Sink(name); ok {
		inst = f()
	}
	p, ok := inst.(sdk.Preflighter)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), preflightTimeout)
	defer cancel()
	if len(pluginConfig) == 0 {
		pluginConfig = []byte("null")
	}
	if errs := p.Preflight(ctx, pluginConfig); len(errs) > 0 {
		return fmt.Errorf("setup (--connect): %w", errors.Join(errs...))
	}
	return nil
}

func report(w io.Writer, kind string, c *config.Common, detail string, err error) int {
	state := "ok"
	if !c.Enabled {
		state = "disabled"
	}
	if err != nil {
		state = "ERROR: " + err.Error()
	}
	fmt.Fprintf(w, "%-6s %-24s %-30s %s  %s\n", kind, c.Key, c.Path, detail, state)
	if err != nil {
		return 1
	}
	return 0
}
