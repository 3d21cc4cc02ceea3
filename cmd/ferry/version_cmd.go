package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X main.Version=…"; otherwise the module
// version recorded by the Go toolchain is shown.
var Version = ""

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Ferry's version and the Iggy protocol it speaks",
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "ferry %s (Iggy server 0.9, binary protocol 0.11.0)\n", versionString())
			return err
		},
	}
}

// versionString is Ferry's version: Version when set at build time, else the module
// version the Go toolchain recorded ("(devel)" for a local build).
func versionString() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}
