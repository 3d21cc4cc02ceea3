package ferrycli

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/sdk"
)

func newConnectorsCmd(reg *sdk.Registry) *cobra.Command {
	var markdown bool
	cmd := &cobra.Command{
		Use:   "connectors [NAME...]",
		Short: "List the Go connectors with their plugin_config fields, types and defaults",
		Long: `Connectors prints every Go connector this binary holds (path = "builtin:NAME": the
built-ins, and in a custom build those its main added) with each plugin_config field: its
name, type, default ("required" when it has none and must be given) and meaning. These
are the specs the connectors decode their config with and ferry check validates against.
Each sink's first line gives its commit facts: the offset_commit modes it runs with, the
mode it runs with when its file sets none, and when it commits under sink_controlled
(each batch, once its target is durable, never: then the mode is refused, or not
declared). With NAMEs, only the sinks and sources of those names are printed (an unknown
name is an error). --markdown prints the two tables of docs/connectors.md (the fields,
then the sinks' commit facts).`,
		RunE: func(cmd *cobra.Command, names []string) error {
			sel, err := selectConnectors(reg, names)
			if err != nil {
				return err
			}
			if markdown {
				if err := connectors.WriteMarkdown(cmd.OutOrStdout(), sel); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout())
				return connectors.WriteCommitsMarkdown(cmd.OutOrStdout(), sel)
			}
			return connectors.WriteText(cmd.OutOrStdout(), sel)
		},
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print the Markdown tables of docs/connectors.md")
	return cmd
}

// selectConnectors returns reg itself without names, else a registry of the sinks and
// sources of reg named in names.
func selectConnectors(reg *sdk.Registry, names []string) (*sdk.Registry, error) {
	if len(names) == 0 {
		return reg, nil
	}
	sel := sdk.NewRegistry()
	for _, n := range names {
		found := false
		if f, ok := reg.Sink(n); ok && !slices.Contains(sel.SinkNames(), n) {
			spec, _ := reg.SinkSpec(n)
			sel.AddSink(n, f, spec)
			found = true
		}
		if f, ok := reg.Source(n); ok && !slices.Contains(sel.SourceNames(), n) {
			spec, _ := reg.SourceSpec(n)
			sel.AddSource(n, f, spec)
			found = true
		}
		if !found && !slices.Contains(sel.SinkNames(), n) && !slices.Contains(sel.SourceNames(), n) {
			return nil, fmt.Errorf("connectors: no connector named %q (sinks: %v, sources: %v)", n, reg.SinkNames(), reg.SourceNames())
		}
	}
	return sel, nil
}
