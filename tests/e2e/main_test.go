package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/internal/testkit"
)

// ferryBin is the binary under test, built once by TestMain.
var ferryBin string

// repoRoot is the module root (two levels up from this package).
var repoRoot string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repoRoot = root
	dir, err := os.MkdirTemp("", "ferry-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ferryBin = filepath.Join(dir, "ferry")
	build := exec.Command("go", "build", "-o", ferryBin, "./cmd/ferry")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building ferry:", err)
		return 1
	}
	// Its tests drive ferry processes through soaks and drains of tens of thousands of
	// messages on a loaded machine: every wait may take up to two minutes.
	testkit.Patience = 2 * time.Minute
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: leaked goroutines:", err)
			return 1
		}
	}
	return code
}
