package native

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// buildDir holds the plugins compiled by this test binary.
var buildDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "ferry-native-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = d
	plugins.Dir = d
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(d) }))
}
