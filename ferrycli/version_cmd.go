package ferrycli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry"
)

func newVersionCmd(version string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Ferry's version and the Iggy protocol it speaks",
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionLine(version))
			return err
		},
	}
}

// versionLine is what `ferry version` and `ferry --version` print.
func versionLine(version string) string {
	return fmt.Sprintf("ferry %s (Iggy server 0.9, binary protocol 0.11.0)\n", version)
}

// versionString is Ferry's version: the one given to SetVersion, else the embedded
// VERSION file's.
func (c *CLI) versionString() string { return orVersion(c.version) }

// orVersion is v, or when empty the VERSION file embedded in package ferry, so a plain
// `go build` never says "(devel)" (the machines build with -buildvcs=false, which leaves
// the toolchain nothing to stamp).
func orVersion(v string) string {
	if v != "" {
		return v
	}
	return ferry.Version()
}
