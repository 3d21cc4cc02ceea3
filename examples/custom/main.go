// Command ferry-custom is Ferry built with one connector of its own: the whole ferry
// command line (run, check, connectors, server, status, …) with the built-in connectors
// and the partfiles sink (path = "builtin:partfiles").
package main

import (
	"fmt"
	"os"

	"github.com/ferryio/ferry/ferrycli"

	"example.com/ferry-custom/partfiles"
)

func main() {
	cli := ferrycli.New()
	if err := cli.AddSink(partfiles.Name, partfiles.New, partfiles.Spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cli.Main()
}
