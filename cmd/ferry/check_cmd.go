package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newCheckCmd is a placeholder replaced by the command's owner.
func newCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("check: not built yet")
		},
	}
}
