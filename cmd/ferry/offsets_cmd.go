package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newOffsetsCmd is a placeholder replaced by the command's owner.
func newOffsetsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "offsets",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("offsets: not built yet")
		},
	}
}
