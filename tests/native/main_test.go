package native

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "ferry-native-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	plugins.Dir = d
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(d) }))
}
