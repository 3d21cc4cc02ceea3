// Package plugintest compiles the repository's C test plugins into shared libraries for
// tests that load them with dlopen (connect/plugin, tests/native). It is a test helper:
// only _test.go files import it.
package plugintest

import (
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Builder compiles C plugins with gcc, each name once per test binary. Safe for concurrent
// use; the zero value is not usable: set Dir and Root.
type Builder struct {
	// Dir receives the .so files (a temporary directory the test binary removes).
	Dir string
	// Root is the repository root relative to the test's working directory; the plugin ABI
	// header and the examples' postcard.h are found under it.
	Root string

	mu   sync.Mutex
	memo map[string]string
}

// C compiles src (relative to the test's working directory) into Dir/name.so with the
// given -D defines, once per name, and returns the library's path. It skips the test when
// gcc is missing and fails it when gcc reports an error.
func (b *Builder) C(t testing.TB, name, src string, defines ...string) string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.memo[name]; ok {
		return p
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: native plugin tests need gcc (CI has it)")
	}
	out := filepath.Join(b.Dir, name+".so")
	args := []string{"-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-pthread",
		"-I" + filepath.Join(b.Root, "include"), "-I" + filepath.Join(b.Root, "examples/plugins/c"), "-o", out}
	for _, d := range defines {
		args = append(args, "-D"+d)
	}
	args = append(args, src)
	if msg, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, msg)
	}
	if b.memo == nil {
		b.memo = map[string]string{}
	}
	b.memo[name] = out
	return out
}
