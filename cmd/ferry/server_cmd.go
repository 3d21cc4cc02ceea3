package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newServerCmd is a placeholder replaced by the command's owner.
func newServerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "server",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("server: not built yet")
		},
	}
}
