package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry"
)

// Version is set at build time with -ldflags "-X main.Version=$(cat VERSION)" (the README's
// build line); without it the VERSION file embedded in package ferry is reported, so a
// plain `go build` never says "(devel)" (the machines build with -buildvcs=false, which
// leaves the toolchain nothing to stamp).
var Version = ""

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Ferry's version and the Iggy protocol it speaks",
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
}

// versionLine is what `ferry version` and `ferry --version` print.
func versionLine() string {
	return fmt.Sprintf("ferry %s (Iggy server 0.9, binary protocol 0.11.0)\n", versionString())
}

// versionString is Ferry's version: Version when set at build time, else the embedded
// VERSION file's.
func versionString() string {
	if Version != "" {
		return Version
	}
	return ferry.Version()
}
