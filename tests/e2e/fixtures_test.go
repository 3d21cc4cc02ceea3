package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// C test fixtures: plugins in testdata/*.c, built with gcc with the flags of
// examples/plugins/c/Makefile (so they may #include the examples and postcard.h).

var (
	fixturesMu sync.Mutex
	fixtures   = map[string]fixtureBuild{}
)

type fixtureBuild struct {
	path string
	err  error
}

// cFixture builds testdata/NAME.c once per test binary, into the directory of the ferry
// binary (removed by TestMain), and returns the path of NAME.so.
func cFixture(t *testing.T, name string) string {
	t.Helper()
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	b, ok := fixtures[name]
	if !ok {
		b.path = filepath.Join(filepath.Dir(ferryBin), "fixtures", name+".so")
		src := filepath.Join(repoRoot, "tests", "e2e", "testdata", name+".c")
		cmd := exec.Command("gcc", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-std=gnu11", "-fPIC", "-pthread", "-shared",
			"-I", filepath.Join(repoRoot, "include"), "-I", filepath.Join(repoRoot, "examples", "plugins", "c"),
			"-o", b.path, src)
		if err := os.MkdirAll(filepath.Dir(b.path), 0o755); err != nil {
			b.err = err
		} else if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("%v: %w\n%s", cmd.Args, err, out)
		}
		fixtures[name] = b
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
