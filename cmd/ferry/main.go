// Command ferry is the single Ferry binary: the connectors runtime, the embedded
// Iggy-compatible server and the operator tools, with the built-in connectors. The command
// line itself lives in package ferrycli, which a program of your own calls to build Ferry
// with connectors of its own (docs/connectors.md).
package main

import "github.com/ferryio/ferry/ferrycli"

// Version is set at build time with -ldflags "-X main.Version=$(cat VERSION)" (the README's
// build line); empty, the VERSION file embedded in package ferry is reported.
var Version = ""

func main() {
	cli := ferrycli.New()
	cli.SetVersion(Version)
	cli.Main()
}
