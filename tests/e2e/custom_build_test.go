package e2e

import (
	"context"
	"fmt"
	"github.com/ferryio/ferry/internal/testkit"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

// customDir is the example module of a custom build (docs/connectors.md).
const customDir = "examples/custom"

// buildCustom builds the example module as its own user would: `go build` in its directory,
// against this checkout (its go.mod replaces the Ferry module with the repository root).
func buildCustom(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ferry-custom")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(repoRoot, customDir)
	// Its own go.mod and go.sum, as committed: no workspace, no edits to either file.
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s\n(when Ferry's go.mod changed: run `go mod tidy` in %s and commit its go.mod and go.sum)",
			customDir, err, out, customDir)
	}
	return bin
}

// partfilesSink is a connector file of the example's sink.
func partfilesSink(dir string, extra string) string {
	return fmt.Sprintf(`type = "sink"
key = "parts"
enabled = true
version = 0
name = "partition files"
path = "builtin:partfiles"
offset_commit = "sink_controlled"

[[streams]]
stream = "custom"
topics = ["t"]
schema = "text"
batch_length = 2
poll_interval = "5ms"

[commit]
interval = "50ms"

[plugin_config]
dir = %q
%s`, dir, extra)
}

// TestCustomBuild builds examples/custom (Ferry with one Go sink of its own, registered
// with ferrycli) and runs it: `connectors` lists the sink beside the built-ins, `check`
// validates its plugin_config with the sink's spec, and `run --embedded` delivers what a
// client sends over TCP to the embedded server into one file per partition and stores the
// offsets the sink committed; a second run resumes after them.
func TestCustomBuild(t *testing.T) {
	bin := buildCustom(t)
	dir := t.TempDir()
	custom := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}

	// connectors: the new sink with its spec, exactly; the built-ins still there.
	out, err := custom("connectors", "partfiles")
	if err != nil {
		t.Fatalf("connectors partfiles: %v\n%s", err, out)
	}
	want := "sink builtin:partfiles\n" +
		"  offset_commit: sink_controlled; when not set: sink_controlled (its only mode); under sink_controlled: commits each batch once written, inside Consume\n" +
		"  dir  string  required  the directory of the partition files (created if missing)\n"
	if out != want {
		t.Fatalf("connectors partfiles:\n%s\nwant:\n%s", out, want)
	}
	all, err := custom("connectors")
	if err != nil {
		t.Fatalf("connectors: %v\n%s", err, all)
	}
	for _, c := range []string{"sink builtin:partfiles", "sink builtin:file", "sink builtin:postgres", "source builtin:random"} {
		if !strings.Contains(all, c+"\n") {
			t.Errorf("connectors lists no %q:\n%s", c, all)
		}
	}

	// check: a valid file passes; a plugin_config the spec refuses fails with its fields.
	outDir := filepath.Join(dir, "out")
	conns := filepath.Join(dir, "connectors")
	writeFile(t, filepath.Join(conns, "parts.toml"), partfilesSink(outDir, ""))
	cfg := runtimeConfig(t, dir, conns)
	if out, err := custom("check", "--config", cfg, "--embedded"); err != nil || !regexpLine(out, `^sink\s+parts\s+builtin:partfiles .* ok$`) {
		t.Fatalf("check: %v\n%s", err, out)
	}
	badDir := filepath.Join(dir, "bad")
	writeFile(t, filepath.Join(badDir, "connectors", "parts.toml"),
		strings.Replace(partfilesSink(outDir, "depth = 3\n"), "dir = ", "directory = ", 1))
	badCfg := runtimeConfig(t, badDir, filepath.Join(badDir, "connectors"))
	out, err = custom("check", "--config", badCfg, "--embedded")
	if err == nil || !strings.Contains(out, "plugin_config.depth: unknown field") ||
		!strings.Contains(out, "plugin_config.directory: unknown field") || !strings.Contains(out, "plugin_config.dir: required") {
		t.Fatalf("check of a bad plugin_config: err %v, want exit 1 naming depth, directory and dir:\n%s", err, out)
	}

	// run: 5 messages to partition 0, 3 to partition 1, each batch fsynced and committed.
	run := startCmd(t, "custom run", exec.Command(bin, "run", "--config", cfg, "--embedded", "--partitions", "2", "--progress", "0"))
	addr := run.embeddedAddr()
	testkit.WaitFor(t, "the connectors spawned", func() bool {
		return strings.Contains(run.out.String(), "All sources and sinks spawned.")
	})
	c := dial(t, addr)
	send := func(p uint32, first, n int) {
		t.Helper()
		msgs := make([]iggy.Message, n)
		for i := range msgs {
			msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, "p%d m%d", p, first+i)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := c.SendMessages(ctx, iggy.Name("custom"), iggy.Name("t"), wire.ToPartition(p), msgs)
		if err != nil {
			t.Fatalf("send to partition %d: %v", p, err)
		}
		if res.BaseOffset != uint64(first) {
			t.Fatalf("send to partition %d landed at %d, want %d", p, res.BaseOffset, first)
		}
	}
	send(0, 0, 5)
	send(1, 0, 3)
	waitStored(t, addr, map[uint32]int64{0: 4, 1: 2})
	run.stop(30 * time.Second)
	file0 := filepath.Join(outDir, "custom.t.0.log")
	file1 := filepath.Join(outDir, "custom.t.1.log")
	wantLines(t, file0, 0, 5, 0)
	wantLines(t, file1, 0, 3, 1)

	// A second run resumes after the stored offsets: nothing written twice.
	run2 := startCmd(t, "custom run 2", exec.Command(bin, "run", "--config", cfg, "--embedded", "--partitions", "2", "--progress", "0"))
	addr = run2.embeddedAddr()
	testkit.WaitFor(t, "the connectors spawned again", func() bool {
		return strings.Contains(run2.out.String(), "All sources and sinks spawned.")
	})
	c = dial(t, addr)
	send(0, 5, 2)
	waitStored(t, addr, map[uint32]int64{0: 6, 1: 2})
	run2.stop(30 * time.Second)
	wantLines(t, file0, 0, 7, 0)
	wantLines(t, file1, 0, 3, 1)
}

// waitStored waits until the sink's group has exactly the stored offsets want.
func waitStored(t *testing.T, addr string, want map[uint32]int64) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("stored offsets %v", want), func() bool {
		offs, err := offsets(t, addr, "custom", "t", "iggy-connect-sink-parts")
		if err != nil {
			return false
		}
		for p, o := range want {
			if offs[p].stored != o {
				return false
			}
		}
		return len(offs) == len(want)
	})
}

// wantLines checks that path holds exactly the lines of offsets from..to-1 of partition p,
// as the partfiles sink writes them.
func wantLines(t *testing.T, path string, from, to int, p uint32) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for o := from; o < to; o++ {
		fmt.Fprintf(&want, "%d %q\n", o, fmt.Sprintf("p%d m%d", p, o))
	}
	if string(b) != want.String() {
		t.Fatalf("%s:\n%s\nwant:\n%s", path, b, want.String())
	}
}

// regexpLine reports whether a line of out matches re.
func regexpLine(out, re string) bool {
	return regexp.MustCompile("(?m)" + re).MatchString(out)
}
