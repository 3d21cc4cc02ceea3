package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/ferryio/ferry/internal/docstest"
	"github.com/ferryio/ferry/internal/testkit"
)

// TestDocsCommands runs every sh block of README.md and docs/*.md marked to run (the
// markers: internal/docstest, docs/testing.md) as a reader would, in a fresh directory
// that holds the repository (its directories linked, its top-level files copied) so that
// what the commands write stays there; the built ferry is first on PATH. The HTTP API and
// the embedded server are moved to free ports through their IGGY_CONNECTORS_* variables, so
// a block never collides with a ferry already on the documented ports. A block marked
// skip is reported as skipped with its reason.
func TestDocsCommands(t *testing.T) {
	docs, err := docstest.Docs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		blocks, err := docstest.Read(repoRoot, doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			t.Run(b.Name(), func(t *testing.T) {
				if !b.Run {
					t.Skip(b.Reason)
				}
				if b.Needs != "" && os.Getenv(b.Needs) == "" {
					t.Skipf("%s is not set: the block needs what .ci/run provides with it", b.Needs)
				}
				runDocBlock(t, b)
			})
		}
	}
}

// runDocBlock runs b in a copy of the repository and checks that it ends with status 0.
func runDocBlock(t *testing.T, b docstest.Block) {
	dir := repoCopy(t)
	body := b.Script
	if b.Ferry != "" {
		body = strings.ReplaceAll(body, docsAPIAddress, startDocsFerry(t, dir, b.Ferry))
	}
	script := "set -eo pipefail\n"
	if b.Cleanup != "" {
		script += "trap '" + strings.ReplaceAll(b.Cleanup, "'", `'\''`) + "' EXIT\n"
	}
	script += body
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(ferryBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"IGGY_CONNECTORS_HTTP_ADDRESS=127.0.0.1:0", "IGGY_CONNECTORS_EMBEDDED_ADDRESS=127.0.0.1:0")
	// Its own process group: Ctrl-C reaches every process of the block, as in a terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := startCmd(t, b.Name(), cmd)
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) // before startCmd's: a child may hold the output open
	if b.Until != "" {
		testkit.WaitFor(t, b.Name()+": "+b.Until, func() bool {
			if p.exited() {
				t.Fatalf("%s ended before its output held %q: %v\n%s", b.Name(), b.Until, p.err, tail(p.out.String(), 30))
			}
			return strings.Contains(p.out.String(), b.Until)
		})
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, b.Name()+" to end", p.exited)
	if p.err != nil && (b.Until == "" || !interruptedGoRun(b.Script, p)) {
		t.Fatalf("%s: %v\n%s", b.Name(), p.err, tail(p.out.String(), 30))
	}
}

// docsAPIAddress is the HTTP API's address the docs' examples use, Ferry's default.
const docsAPIAddress = "127.0.0.1:8081"

var apiStartedRE = regexp.MustCompile(`msg="HTTP API started" address=(\S+)`)

// startDocsFerry starts the fixture of a block marked `run ferry "CONFIG"`: CONFIG's
// directory copied into dir, CONFIG as dir/config.toml, and `ferry run --embedded` on it
// with the API and the embedded server on free ports. Once it is caught up (every message
// its sources produce delivered and committed) it returns the API's bound address. The
// fixture must still run when the block ends (a block that stopped it would have tested
// nothing of it); it is stopped with SIGINT and must exit 0.
func startDocsFerry(t *testing.T, dir, config string) string {
	t.Helper()
	src := filepath.Join(repoRoot, config)
	if err := os.CopyFS(dir, os.DirFS(filepath.Dir(src))); err != nil {
		t.Fatalf("copy the fixture of %s: %v", config, err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := startFerry(t, "fixture "+config, dir,
		[]string{"IGGY_CONNECTORS_HTTP_ADDRESS=127.0.0.1:0", "IGGY_CONNECTORS_EMBEDDED_ADDRESS=127.0.0.1:0"},
		"run", "--config", "config.toml", "--embedded")
	var addr string
	testkit.WaitFor(t, "fixture "+config+" caught up", func() bool {
		if p.exited() {
			t.Fatalf("fixture %s ended: %v\n%s", config, p.err, tail(p.out.String(), 30))
		}
		out := p.out.String()
		if m := apiStartedRE.FindStringSubmatch(out); m != nil && strings.Contains(out, "ferry: caught up") {
			addr = m[1]
			return true
		}
		return false
	})
	t.Cleanup(func() {
		if p.exited() {
			t.Errorf("fixture %s ended during the block: %v\n%s", config, p.err, tail(p.out.String(), 30))
			return
		}
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Error(err)
		}
		testkit.WaitFor(t, "fixture "+config+" to end", p.exited)
		if p.err != nil {
			t.Errorf("fixture %s after Ctrl-C: %v\n%s", config, p.err, tail(p.out.String(), 30))
		}
	})
	return addr
}

// interruptedGoRun tells whether p's status 1 after Ctrl-C is that of a `go run` whose
// program exited 0: the go command ends with status 1 after any interrupt, whatever its
// program's status, and prints "exit status N" only when the program failed.
func interruptedGoRun(script string, p *proc) bool {
	lines := strings.Split(strings.TrimSpace(script), "\n")
	return strings.Contains(lines[len(lines)-1], "go run ") && p.exitCode() == 1 &&
		!strings.Contains(p.out.String(), "exit status ")
}

// repoCopy makes a directory that reads as the repository: each directory git tracks at the
// top is linked (examples/ copied), each top-level file copied (go:embed does not read a
// linked file).
func repoCopy(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repoRoot, "ls-files").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := t.TempDir()
	seen := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		top, _, _ := strings.Cut(strings.TrimSpace(line), "/")
		if top == "" || seen[top] {
			continue
		}
		seen[top] = true
		src := filepath.Join(repoRoot, top)
		fi, err := os.Stat(src)
		if err != nil {
			continue // tracked but deleted in the working tree
		}
		switch {
		case top == "examples":
			// Copied: the docs build examples in place and write next to them
			// (`cd examples/custom && go build -o ../../bin/...`), which through a
			// link would write into the repository.
			err = os.CopyFS(filepath.Join(dir, top), os.DirFS(src))
		case fi.IsDir():
			err = os.Symlink(src, filepath.Join(dir, top))
		default:
			var b []byte
			if b, err = os.ReadFile(src); err == nil {
				err = os.WriteFile(filepath.Join(dir, top), b, fi.Mode().Perm())
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
