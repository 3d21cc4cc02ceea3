// Package ferrycli is the ferry command line as a library: every command of the ferry
// binary (run, server, check, connectors, offsets, status, bench, conformance, version)
// behind one [CLI] value. cmd/ferry is a main that calls it with the built-in connectors;
// a program of your own calls it with Go connectors of its own as well, with no fork of
// Ferry:
//
//	func main() {
//		cli := ferrycli.New()
//		if err := cli.AddSink("mysink", mysink.New, mysink.Spec); err != nil {
//			log.Fatal(err)
//		}
//		cli.Main()
//	}
//
// A connector file then names the sink with path = "builtin:mysink"; `ferry check`
// validates its plugin_config with the spec given to AddSink and `ferry connectors` prints
// it. Registration is explicit (no init side effects) and refuses a name already taken.
// docs/connectors.md walks through writing a connector; examples/custom is a complete
// module.
//
// The package sits at the top of the import graph: it imports the runtime, the embedded
// server, the built-in connectors; only commands import it.
package ferrycli
