package main

import (
	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/connectors"
)

func newConnectorsCmd() *cobra.Command {
	var markdown bool
	cmd := &cobra.Command{
		Use:   "connectors",
		Short: "List the built-in connectors with their plugin_config fields, types and defaults",
		Long: `Connectors prints every built-in connector (path = "builtin:NAME") with each
plugin_config field: its name, type, default ("required" when it has none and must be
given) and meaning. These are the specs the connectors decode their config with and
ferry check validates against. --markdown prints the table of docs/connectors.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if markdown {
				return connectors.WriteMarkdown(cmd.OutOrStdout(), connectors.Registry())
			}
			return connectors.WriteText(cmd.OutOrStdout(), connectors.Registry())
		},
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print a Markdown table (docs/connectors.md's)")
	return cmd
}
