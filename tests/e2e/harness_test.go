package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/syncbuf"
	"github.com/ferryio/ferry/internal/testkit"
)

// proc is one ferry child process.
type proc struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	out    *syncbuf.Buffer // stdout + stderr
	done   chan struct{}
	err    error
	killed bool
}

// startFerry runs the ferry binary with args in dir, with extra environment entries. The
// process is killed at the end of the test if it still runs; its output is logged when the
// test fails.
func startFerry(t testing.TB, name, dir string, env []string, args ...string) *proc {
	t.Helper()
	return startCmd(t, name, ferryCmd(dir, env, args...))
}

// ferryCmd is the command startFerry runs, for a test that sets more of it first.
func ferryCmd(dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(ferryBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// startCmd starts cmd as startFerry does.
func startCmd(t testing.TB, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	args := cmd.Args[1:]
	p := &proc{t: t, name: name, cmd: cmd, out: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- output of %s (%v):\n%s", name, args, tail(p.out.String(), 60))
		}
	})
	return p
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// kill sends SIGKILL and waits for the process to end.
func (p *proc) kill() {
	p.t.Helper()
	p.killed = true
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Fatalf("kill %s: %v", p.name, err)
	}
	<-p.done
}

// stop sends SIGTERM and expects a clean exit within timeout.
func (p *proc) stop(timeout time.Duration) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("signal %s: %v", p.name, err)
	}
	p.wait(timeout)
}

// wait expects the process to exit with status 0 within timeout.
func (p *proc) wait(timeout time.Duration) {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %s", p.name, timeout)
	}
	if p.err != nil {
		p.t.Fatalf("%s exited with %v", p.name, p.err)
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

var addrRE = regexp.MustCompile(`embedded Iggy server started" addr=(\S+)`)

// embeddedAddr waits for the process's "embedded Iggy server started" log line and returns
// the address.
func (p *proc) embeddedAddr() string {
	p.t.Helper()
	var addr string
	testkit.WaitFor(p.t, p.name+" embedded server address", func() bool {
		if p.exited() {
			p.t.Fatalf("%s exited early: %v", p.name, p.err)
		}
		if m := addrRE.FindStringSubmatch(p.out.String()); m != nil {
			addr = m[1]
			return true
		}
		return false
	})
	return addr
}

// record is the part of a file sink line the tests check.
type record struct {
	Partition uint32 `json:"partition"`
	Offset    uint64 `json:"offset"`
	ID        string `json:"id"`
}

// seq returns the random source's message number (id − 1) of r.
func (r record) seq(t *testing.T) uint64 {
	t.Helper()
	if len(r.ID) != 32 {
		t.Fatalf("bad id %q", r.ID)
	}
	v, err := strconv.ParseUint(r.ID[16:], 16, 64)
	if err != nil || r.ID[:16] != "0000000000000000" || v == 0 {
		t.Fatalf("bad id %q", r.ID)
	}
	return v - 1
}

// readIfExists returns the bytes of the file at path, nil when there is none yet.
func readIfExists(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return b
}

// readRecords parses a file sink's output. Every complete line must be a JSON record; an
// unterminated last line (a write in progress) is ignored.
func readRecords(t *testing.T, path string) []record {
	t.Helper()
	b := readIfExists(t, path)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	var out []record
	for line := 1; len(b) > 0; line++ {
		l, rest, _ := bytes.Cut(b, []byte{'\n'})
		b = rest
		var r record
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("%s:%d: not a JSON record: %v: %q", path, line, err, l)
		}
		out = append(out, r)
	}
	return out
}

// countLines counts newline characters (cheap, for progress checks while a sink writes).
func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte{'\n'})
}

// partitionOffsets is one partition's line of `ferry offsets`.
type partitionOffsets struct {
	current, stored int64 // -1 = none
}

// offsets runs `ferry offsets` and parses its table.
func offsets(t *testing.T, addr, stream, topic, group string) (map[uint32]partitionOffsets, error) {
	t.Helper()
	cmd := exec.Command(ferryBin, "offsets", "--addr", addr, "--stream", stream, "--topic", topic, "--group", group, "--timeout", "5s")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ferry offsets: %w: %s", err, out)
	}
	res := map[uint32]partitionOffsets{}
	for _, line := range strings.Split(string(out), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		p, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("ferry offsets: unexpected line %q", line)
		}
		num := func(s string) int64 {
			if s == "-" {
				return -1
			}
			v, _ := strconv.ParseInt(s, 10, 64)
			return v
		}
		res[uint32(p)] = partitionOffsets{current: num(f[1]), stored: num(f[2])}
	}
	return res, nil
}

// writeFile writes content to dir/name, creating dirs.
func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runtimeConfig writes a config.toml for an embedded run under dir and returns its path.
func runtimeConfig(t testing.TB, dir, connectorsDir string) string {
	t.Helper()
	return runtimeConfigTail(t, dir, connectorsDir, "[http]\nenabled = false\n")
}

// runtimeConfigTail is runtimeConfig with tail (the [http] section and any after it) in
// place of the disabled HTTP API.
func runtimeConfigTail(t testing.TB, dir, connectorsDir, tail string) string {
	t.Helper()
	path := filepath.Join(dir, "config.toml")
	writeFile(t, path, fmt.Sprintf(`[iggy]
address = "127.0.0.1:8090"
username = "iggy"
password = "iggy"

[state]
path = %q

[connectors]
config_type = "local"
config_dir = %q

[embedded]
address = "127.0.0.1:0"
data_dir = %q

`, filepath.Join(dir, "state"), connectorsDir, filepath.Join(dir, "data"))+tail)
	return path
}

// randomSource is a random source connector file.
func randomSource(stream, topic string, count, perSecond, batch int) string {
	return fmt.Sprintf(`type = "source"
key = "gen"
enabled = true
version = 0
name = "generator"
path = "builtin:random"

[[streams]]
stream = %q
topic = %q
schema = "text"
batch_length = %d

[plugin_config]
count = %d
payload_size = 100
batch_size = %d
messages_per_second = %d
seed = 7
`, stream, topic, batch, count, batch, perSecond)
}

// fileSink is a file sink connector file with key "out".
func fileSink(stream, topic, mode, path string, batch, maxUncommitted int) string {
	return fmt.Sprintf(`type = "sink"
key = "out"
enabled = true
version = 0
name = "file out"
path = "builtin:file"
offset_commit = %q

[[streams]]
stream = %q
topics = [%q]
schema = "text"
batch_length = %d
poll_interval = "5ms"

[commit]
interval = "200ms"
max_uncommitted = %d

[plugin_config]
path = %q
flush_interval = "200ms"
`, mode, stream, topic, batch, maxUncommitted, path)
}

// sinkGroup is the consumer group of the sink with key "out".
const sinkGroup = "iggy-connect-sink-out"
