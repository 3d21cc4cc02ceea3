package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newBenchCmd is a placeholder replaced by the command's owner.
func newBenchCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "bench",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("bench: not built yet")
		},
	}
}
