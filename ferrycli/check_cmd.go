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
	var cc connectCheck
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

With --connect it also connects. To the Iggy server of [iggy]: every stream and topic an
enabled connector names (sinks' topics, a source's topic, dead-letter topics) must exist
with at least one partition (each line notes the partition counts), or with
--create-topics be what ferry run --create-topics creates (with --embedded the server is
not running, and run creates them). And to the systems of the built-ins that can check
them (sdk.Preflighter: the PostgreSQL sink and CDC source, S3, the file sink, Iceberg,
MongoDB, ...): each problem names the connector file, the key and the fix. Still nothing
is created or changed, but for the S3 sink's probe object, written under its prefix and
removed.`,
		Example: `  ferry check --config examples/quickstart/config.toml
  ferry check --config config.toml --connect
  ferry check --config config.toml --connect --create-topics --partitions 3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.ctx, o.logTo, o.logLevel = cmd.Context(), cmd.ErrOrStderr(), "warn"
			if !withConnect {
				return check(cmd.OutOrStdout(), o)
			}
			return checkWith(cmd.OutOrStdout(), o, &cc)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.config, "config", envString(envConfig, ""), "runtime config.toml [FERRY_CONFIG]")
	fl.BoolVar(&o.embedded, "embedded", envBool(envEmbedded, false), "check as ferry run --embedded would [FERRY_EMBEDDED]")
	fl.StringVar(&o.data, "data", envString(envData, ""), "as ferry run --data [FERRY_DATA]")
	fl.StringVar(&o.embeddedAddr, "embedded-addr", "", "as ferry run --embedded-addr")
	fl.BoolVar(&withConnect, "connect", false, "also connect to Iggy (every stream and topic the enabled connectors name, with its partitions) and to the built-in connectors' systems, and check their setup")
	fl.BoolVar(&cc.createTopics, "create-topics", false, "with --connect: a missing stream or topic is no problem, as ferry run --create-topics creates it")
	fl.Uint32Var(&cc.partitions, "partitions", uint32(envUint(envPartitions, 1)), "with --connect: the partitions ferry run --create-topics would give a missing topic [FERRY_PARTITIONS]")
	return cmd
}

// checkOptions are the runtime options `ferry run` builds its connectors with.
func checkOptions(rc *config.Runtime, builtins *sdk.Registry) connect.Options {
	return connect.Options{Runtime: rc, Builtins: orBuiltins(builtins),
		LoadSinkPlugin: connect.NativeSinkLoader, LoadSourcePlugin: connect.NativeSourceLoader}
}

// check runs prepareStart as `ferry run` does (without creating config_dir), then checks
// every connector with what the runtime checks before opening it.
func check(w io.Writer, o startOptions) error { return checkWith(w, o, nil) }

// connectCheck is what `ferry check --connect` was given.
type connectCheck struct {
	createTopics bool   // --create-topics
	partitions   uint32 // --partitions
}

// checkWith is check; with cc (--connect) it also reads from the Iggy server every stream
// and topic the enabled connectors name, and runs every enabled built-in's sdk.Preflighter.
func checkWith(w io.Writer, o startOptions, cc *connectCheck) error {
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
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var topics *iggyTopics // nil: the Iggy side is not checked
	iggyBad := false
	if cc != nil {
		switch {
		case plan.embedded != nil:
			fmt.Fprintf(w, "iggy   embedded: not running during check; ferry run --embedded creates every missing stream and topic (--partitions: %d)\n", cc.partitions)
		default:
			client, err := dialIggyCheck(ctx, rc)
			if err != nil {
				fmt.Fprintf(w, "iggy   %s  ERROR: %s\n", rc.Iggy.Address, err)
				iggyBad = true
				break
			}
			defer func() { _ = client.Close() }()
			fmt.Fprintf(w, "iggy   %s  ok\n", rc.Iggy.Address)
			topics = &iggyTopics{client: client, addr: rc.Iggy.Address, createTopics: cc.createTopics, partitions: cc.partitions, seen: map[[2]string]topicCheck{}}
		}
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
		if err == nil && cc != nil && s.Enabled {
			var note string
			note, err = connectChecks(ctx, topics, opts.Builtins, &s.Common, sourceTopics(s), true)
			detail += note
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
		if err == nil && cc != nil && s.Enabled {
			var note string
			note, err = connectChecks(ctx, topics, opts.Builtins, &s.Common, sinkTopics(s), false)
			detail += note
		}
		bad += report(w, "sink", &s.Common, detail, err)
	}
	for _, inv := range conns.Invalid {
		c := config.Common{Key: inv.Key, Path: "-", Enabled: inv.Enabled}
		bad += report(w, string(inv.Type), &c, fmt.Sprintf("version %d", inv.Version), inv.Err)
	}
	switch {
	case iggyBad && bad > 0:
		return fmt.Errorf("check: the Iggy server unreachable and %d connector(s) with problems", bad)
	case iggyBad:
		return errors.New("check: the Iggy server unreachable")
	case bad > 0:
		return fmt.Errorf("check: %d connector(s) with problems", bad)
	}
	return nil
}

// connectChecks is --connect for one enabled connector: the Iggy side (topics nil: not
// checked) and its built-in's sdk.Preflighter. It returns the note for the connector's
// line and every problem, joined, each naming the connector's file and key.
func connectChecks(ctx context.Context, topics *iggyTopics, reg *sdk.Registry, c *config.Common, names []named, source bool) (string, error) {
	var notes []string
	var errs []error
	if topics != nil {
		notes, errs = topics.checkAll(ctx, c.File, names)
	}
	if err := preflight(ctx, reg, c, source); err != nil {
		errs = append(errs, err)
	}
	return iggyNotes(notes), errors.Join(errs...)
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

// preflight runs a built-in connector's sdk.Preflighter, if it has one. Its problems come
// back joined, each as the connector's file, the plugin_config key's line and the key (a
// problem that is an *sdk.FieldError names its key; any other is the plugin_config table's).
func preflight(ctx context.Context, reg *sdk.Registry, c *config.Common, source bool) error {
	name, ok := c.Builtin()
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
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	raw := c.PluginConfig
	if len(raw) == 0 {
		raw = []byte("null")
	}
	return c.PluginConfigError(errors.Join(p.Preflight(ctx, raw)...))
}

func report(w io.Writer, kind string, c *config.Common, detail string, err error) int {
	state := "ok"
	if !c.Enabled {
		state = "disabled"
	}
	if err != nil {
		// One problem per line: the second and later ones indented under the first.
		state = "ERROR: " + strings.ReplaceAll(strings.TrimRight(err.Error(), "\n"), "\n", "\n       ")
	}
	fmt.Fprintf(w, "%-6s %-24s %-30s %s  %s\n", kind, c.Key, c.Path, detail, state)
	if err != nil {
		return 1
	}
	return 0
}
