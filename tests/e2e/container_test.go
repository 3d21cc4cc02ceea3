package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
)

// containerUID is the image's user (Dockerfile USER): distroless's nonroot.
const containerUID = 65532

// ferryContainer is the image of the repository's Dockerfile running under podman, as
// scripts/container.sh starts it.
type ferryContainer struct {
	t     *testing.T
	env   []string
	iggy  string // the embedded server's address (--network=host)
	api   string // the HTTP API's URL
	data  string // the host directory mounted as the data volume
	start time.Time
}

// script runs scripts/container.sh with args against this test's container directory.
func (c *ferryContainer) script(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{filepath.Join(repoRoot, "scripts", "container.sh")}, args...)...)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// podman runs podman with the container directory's storage and fails the test on an error.
func (c *ferryContainer) podman(args ...string) string {
	c.t.Helper()
	out, err := c.script(append([]string{"podman"}, args...)...)
	if err != nil {
		c.t.Fatalf("podman %v: %v\n%s", args, err, out)
	}
	return out
}

// healthy waits until the image's HEALTHCHECK, run by podman inside the container, passes.
func (c *ferryContainer) healthy() {
	c.t.Helper()
	testkit.WaitFor(c.t, "the image's HEALTHCHECK to pass", func() bool {
		if state := strings.TrimSpace(c.podman("inspect", "--format", "{{.State.Status}}", "ferry-ci")); state != "running" {
			c.t.Fatalf("the container is %s, not running", state)
		}
		_, err := c.script("health")
		return err == nil
	})
}

// produce sends the lines "c-from" … "c-to" with `ferry produce` (the binary under test, on
// the host) into the container's embedded server.
func (c *ferryContainer) produce(from, to int) {
	c.t.Helper()
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "c-%d\n", i)
	}
	cmd := exec.Command(ferryBin, "produce", "events", "in", "--addr", c.iggy)
	cmd.Dir = c.t.TempDir() // no config.toml to find: the flags and the defaults
	cmd.Stdin = strings.NewReader(b.String())
	out, err := cmd.CombinedOutput()
	if want := fmt.Sprintf("ferry: sent %d messages to events/in", to-from+1); err != nil || !strings.Contains(string(out), want) {
		c.t.Fatalf("ferry produce: %v\n%s\nwant %q", err, out, want)
	}
}

// sinkOutput waits until the image's file sink has written n lines to the data volume and
// checks that they are the messages at offsets 0 … n-1, "c-1" … "c-n", once each, in order.
func (c *ferryContainer) sinkOutput(n int) {
	c.t.Helper()
	path := filepath.Join(c.data, "out", "events.jsonl")
	testkit.WaitFor(c.t, fmt.Sprintf("%d lines in the data volume's out/events.jsonl", n), func() bool {
		return countLines(path) >= n
	})
	lines := strings.Split(strings.TrimSuffix(string(readIfExists(c.t, path)), "\n"), "\n")
	if len(lines) != n {
		c.t.Fatalf("out/events.jsonl has %d lines, want %d", len(lines), n)
	}
	for i, line := range lines {
		var rec struct {
			Stream, Topic string
			Partition     uint32
			Offset        uint64
			Payload       string
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			c.t.Fatalf("out/events.jsonl line %d: %v: %s", i+1, err, line)
		}
		payload, err := base64.StdEncoding.DecodeString(rec.Payload)
		if err != nil {
			c.t.Fatalf("out/events.jsonl line %d: payload: %v", i+1, err)
		}
		if rec.Stream != "events" || rec.Topic != "in" || rec.Partition != 0 || rec.Offset != uint64(i) || string(payload) != "c-"+strconv.Itoa(i+1) {
			c.t.Fatalf("out/events.jsonl line %d: events/in partition %d offset %d payload %q, want events/in partition 0 offset %d payload c-%d",
				i+1, rec.Partition, rec.Offset, payload, i, i+1)
		}
	}
}

// startContainer builds the image with scripts/container.sh over scratch bases of the
// binary under test and starts it; the container, its images and its directory are
// removed at the end of the test.
func startContainer(t *testing.T) *ferryContainer {
	t.Helper()
	c := &ferryContainer{t: t, start: time.Now(),
		env: append(os.Environ(), "FERRY_BIN="+ferryBin, "FERRY_CONTAINER_STATE="+filepath.Join(t.TempDir(), "container.dir"))}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := c.script("logs")
			t.Logf("--- the container's output:\n%s", tail(out, 60))
		}
		if out, err := c.script("stop"); err != nil {
			t.Errorf("container.sh stop: %v\n%s", err, out)
		}
		t.Logf("image built, container run and removed in %s", time.Since(c.start).Round(time.Second))
	})
	out, err := c.script("start")
	if err != nil {
		t.Fatalf("container.sh start: %v\n%s", err, out)
	}
	vars := map[string]string{}
	for line := range strings.Lines(out) {
		if k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "="); ok {
			vars[k] = v
		}
	}
	c.iggy, c.api, c.data = vars["FERRY_CONTAINER_IGGY_ADDR"], vars["FERRY_CONTAINER_API_URL"], vars["FERRY_CONTAINER_DATA"]
	if vars["FERRY_CONTAINER_DIR"] == "" || c.iggy == "" || c.api == "" || c.data == "" {
		t.Fatalf("container.sh start printed no FERRY_CONTAINER_DIR, _IGGY_ADDR, _API_URL and _DATA:\n%s", out)
	}
	c.env = append(c.env, "FERRY_CONTAINER_DIR="+vars["FERRY_CONTAINER_DIR"])
	return c
}

// TestContainerImage builds the repository's Dockerfile as CI can (base images cannot be
// pulled there: scripts/container.sh gives the build arguments local scratch images of
// the binary under test and the libc files it loads) and runs it under podman and runc
// with the data volume a host directory. The image runs as its non-root user with no
// secret in its environment; its HEALTHCHECK passes in the container (and fails when the
// API does not answer); 1,000 messages sent with `ferry produce` into the container's
// embedded server are in the default file sink's output on the volume, offsets 0 … 999
// once each; the container stops cleanly (exit 0) and, started again on the same volume,
// resumes: 500 more make 1,500 lines with no duplicate, and `ferry consume` reads the
// 1,500 back. FERRY_CONTAINER=1 runs it (.ci/run sets it once podman and runc are there).
func TestContainerImage(t *testing.T) {
	if os.Getenv("FERRY_CONTAINER") != "1" {
		t.Skip("FERRY_CONTAINER=1 runs the container image under podman (scripts/container.sh install; .ci/run sets it)")
	}
	c := startContainer(t)

	var img []struct {
		Config struct {
			User    string
			Env     []string
			Volumes map[string]struct{}
		}
		Healthcheck struct{ Test []string }
	}
	if err := json.Unmarshal([]byte(c.podman("image", "inspect", "localhost/ferry:ci")), &img); err != nil || len(img) != 1 {
		t.Fatalf("podman image inspect: %v (%d images)", err, len(img))
	}
	if got := img[0].Config.User; got != "65532:65532" {
		t.Errorf("image user %q, want 65532:65532", got)
	}
	if _, ok := img[0].Config.Volumes["/var/lib/ferry"]; !ok || len(img[0].Config.Volumes) != 1 {
		t.Errorf("image volumes %v, want only /var/lib/ferry", img[0].Config.Volumes)
	}
	if len(img[0].Config.Env) != 1 || !strings.HasPrefix(img[0].Config.Env[0], "PATH=") {
		t.Errorf("image environment %q, want only PATH (no credentials baked in)", img[0].Config.Env)
	}
	if got, want := strings.Join(img[0].Healthcheck.Test, " "), "CMD /usr/local/bin/ferry health --config /etc/ferry/config.toml"; got != want {
		t.Errorf("image HEALTHCHECK %q, want %q", got, want)
	}

	c.healthy()
	resp, err := http.Get(c.api + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != `{"status":"healthy"}` {
		t.Fatalf("GET /health from the host: %d %s", resp.StatusCode, body)
	}
	// The check can fail: the same command in the container exits 1 when no API answers.
	if out, err := c.script("podman", "exec", "ferry-ci", "/usr/local/bin/ferry", "health", "--url", "http://127.0.0.1:1"); err == nil ||
		!strings.Contains(out, "cannot reach the Ferry API at http://127.0.0.1:1") {
		t.Fatalf("ferry health against a closed port, in the container: %v\n%s", err, out)
	}

	// The runtime's process and what it wrote are the image's user's, not root's.
	pid := strings.TrimSpace(c.podman("inspect", "--format", "{{.State.Pid}}", "ferry-ci"))
	status := string(readIfExists(t, "/proc/"+pid+"/status"))
	if !strings.Contains(status, fmt.Sprintf("\nUid:\t%d\t%d\t%d\t%d\n", containerUID, containerUID, containerUID, containerUID)) {
		t.Fatalf("the container's process (pid %s) does not run as uid %d:\n%s", pid, containerUID, status)
	}

	c.produce(1, 1000)
	c.sinkOutput(1000)
	for _, name := range []string{"iggy", "state", "out", "out/events.jsonl"} {
		fi, err := os.Stat(filepath.Join(c.data, name))
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != containerUID {
			t.Errorf("the data volume's %s belongs to uid %d, want %d", name, uid, containerUID)
		}
	}

	// A clean stop (SIGTERM to ferry, the container's PID 1, not the SIGKILL after -t) ...
	c.podman("stop", "-t", "60", "ferry-ci")
	if code := strings.TrimSpace(c.podman("inspect", "--format", "{{.State.ExitCode}}", "ferry-ci")); code != "0" {
		t.Fatalf("the container exited with %s after podman stop, want 0", code)
	}
	// ... and a start on the same volume: the stream, its messages and the sink's offset
	// were kept, so only the new messages are written.
	c.podman("start", "ferry-ci")
	c.healthy()
	c.produce(1001, 1500)
	c.sinkOutput(1500)

	cmd := exec.Command(ferryBin, "consume", "events", "in", "--addr", c.iggy, "--format", "raw")
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ferry consume: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != 1500 || got[0] != "c-1" || got[1499] != "c-1500" {
		t.Fatalf("ferry consume printed %d lines (%q … %q), want c-1 … c-1500", len(got), got[0], got[len(got)-1])
	}
	logs, _ := c.script("logs")
	if n := strings.Count(logs, "created stream and topic"); n != 1 {
		t.Fatalf("the container's log says %d times that it created the stream and topic, want 1 (the second start found them on the volume)", n)
	}
}
