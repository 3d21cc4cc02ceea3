package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/plugin"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/sdk"
)

func newCheckCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate a config.toml, its connector files and their plugins without connecting",
		Long: `Check parses the runtime config and every connector file (errors name file:line: key),
then loads each enabled connector's plugin: built-ins must exist; native libraries are
dlopened and their ABI symbols checked (a sink_controlled sink needs
iggy_sink_set_commit_callback). It prints one line per connector and exits non-zero on any
problem. Nothing is sent to Iggy.`,
		Example: `  ferry check --config examples/quickstart/config.toml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return check(cmd.OutOrStdout(), path)
		},
	}
	cmd.Flags().StringVar(&path, "config", envString(envConfig, ""), "runtime config.toml [FERRY_CONFIG]")
	return cmd
}

func check(w io.Writer, path string) error {
	rc, conns, err := loadConfig(path, false)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "config %s: ok (iggy %s, config_dir %s, state %s)\n", rc.Path, rc.Iggy.Address, rc.Connectors.ConfigDir, rc.State.Path)
	for _, warn := range append(append([]string(nil), rc.Warnings...), conns.Warnings...) {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	reg := connectors.Registry()
	dirs := rc.PluginDirs()
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
		err := checkSource(reg, &s.Common, dirs)
		bad += report(w, "source", &s.Common, detail, err)
	}
	for _, s := range conns.Sinks {
		detail := fmt.Sprintf("offset_commit=%s on_failure=%s", s.OffsetCommit, s.OnFailure)
		for _, st := range s.Streams {
			detail += fmt.Sprintf(" ← %s/%v", st.Stream, st.Topics)
		}
		err := checkSink(reg, s, dirs)
		bad += report(w, "sink", &s.Common, detail, err)
	}
	if bad > 0 {
		return fmt.Errorf("check: %d connector(s) with problems", bad)
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

func checkSource(reg *sdk.Registry, c *config.Common, dirs []string) error {
	if name, ok := c.Builtin(); ok {
		if _, ok := reg.Source(name); !ok {
			return fmt.Errorf("unknown built-in source %q (known: %v)", name, reg.SourceNames())
		}
		spec, _ := reg.SourceSpec(name)
		return checkPluginConfig(spec, c)
	}
	lib, err := openPlugin(c.Path, dirs)
	if err != nil {
		return err
	}
	return lib.CheckSource()
}

func checkSink(reg *sdk.Registry, s *config.Sink, dirs []string) error {
	if name, ok := s.Builtin(); ok {
		if _, ok := reg.Sink(name); !ok {
			return fmt.Errorf("unknown built-in sink %q (known: %v)", name, reg.SinkNames())
		}
		spec, _ := reg.SinkSpec(name)
		return checkPluginConfig(spec, &s.Common)
	}
	lib, err := openPlugin(s.Path, dirs)
	if err != nil {
		return err
	}
	if err := lib.CheckSink(); err != nil {
		return err
	}
	if s.OffsetCommit == config.CommitSinkControlled && !lib.SupportsCommit() {
		// The text `ferry run` reports when it refuses the connector (connect/plugin).
		return fmt.Errorf("plugin %s (connector %q): offset_commit = sink_controlled needs symbol %s: %w",
			lib.Path(), s.Key, plugin.SymSinkSetCommit, plugin.ErrCommitUnsupported)
	}
	return nil
}

// checkPluginConfig validates a built-in connector's plugin_config against its spec, as its
// Open would; every problem is named with the connector's file.
func checkPluginConfig(spec sdk.ConfigSpec, c *config.Common) error {
	errs := append(spec.Validate(c.PluginConfig), config.CheckOutputPaths(spec, c.PluginConfig)...)
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%s: %s", c.File, strings.Join(msgs, "; "))
}

// openPlugin opens a connector's native plugin as `ferry run` would: only from inside the
// plugin directories dirs (a library elsewhere is refused, never opened).
func openPlugin(path string, dirs []string) (*plugin.Library, error) {
	resolved, err := config.LoadablePluginPath(path, dirs)
	if err != nil {
		return nil, err
	}
	lib, err := plugin.Open(resolved)
	if err != nil {
		var se *plugin.SymbolError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%s: %w", resolved, err)
		}
		return nil, err
	}
	return lib, nil
}
