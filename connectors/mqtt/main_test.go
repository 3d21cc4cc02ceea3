package mqtt

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// broker returns the test broker's URL (scripts/mosquitto.sh start): the test is skipped
// when FERRY_MQTT_URL is unset and fails when it is set and nothing answers there.
func broker(t testing.TB) string {
	t.Helper()
	raw := os.Getenv("FERRY_MQTT_URL")
	if raw == "" {
		t.Skip("FERRY_MQTT_URL is not set (eval \"$(bash scripts/mosquitto.sh start)\")")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("FERRY_MQTT_URL %q: %v", raw, err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatalf("FERRY_MQTT_URL is set but the broker does not answer: %v", err)
	}
	_ = c.Close()
	return raw
}

// hostPort splits a broker URL for the mosquitto clients.
func hostPort(t testing.TB, raw string) (string, string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), u.Port()
}

// publish publishes each payload on topic with mosquitto_pub (an MQTT client nobody here
// wrote), at qos, each line one message.
func publish(t testing.TB, url, topic string, qos int, retain bool, payloads ...string) {
	t.Helper()
	host, port := hostPort(t, url)
	args := []string{"-h", host, "-p", port, "-q", fmt.Sprint(qos), "-t", topic, "-l"}
	if retain {
		args = append(args, "-r")
	}
	cmd := exec.Command("mosquitto_pub", args...)
	cmd.Stdin = strings.NewReader(strings.Join(payloads, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub %v: %v\n%s", args, err, out)
	}
}

// subscriber is mosquitto_sub subscribed to a filter, collecting "topic payload" lines.
type subscriber struct {
	mu    sync.Mutex
	lines []string
	cmd   *exec.Cmd
	done  chan struct{}
}

// subscribe starts mosquitto_sub on filter at QoS 1 and waits until it receives a probe
// published on probeTopic (which the filter must match), so nothing sent after it is missed.
func subscribe(t testing.TB, url, filter, probeTopic string) *subscriber {
	t.Helper()
	host, port := hostPort(t, url)
	s := &subscriber{done: make(chan struct{})}
	s.cmd = exec.Command("mosquitto_sub", "-h", host, "-p", port, "-q", "1", "-v", "-t", filter)
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("mosquitto_sub: %v", err)
	}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); <-s.done; _ = s.cmd.Wait() })
	probe := fmt.Sprintf("probe-%d", time.Now().UnixNano())
	testkit.WaitFor(t, "mosquitto_sub subscribed", func() bool {
		publish(t, url, probeTopic, 1, false, probe)
		return s.has(probeTopic + " " + probe)
	})
	s.reset()
	return s
}

func (s *subscriber) has(line string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if l == line {
			return true
		}
	}
	return false
}

// got returns the lines received, without probes.
func (s *subscriber) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.lines {
		if !strings.Contains(l, " probe-") {
			out = append(out, l)
		}
	}
	return out
}

func (s *subscriber) reset() {
	s.mu.Lock()
	s.lines = nil
	s.mu.Unlock()
}

// uniq returns a name no other test run uses (topics, client ids).
func uniq(t testing.TB) string {
	return fmt.Sprintf("%s-%d", strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()), time.Now().UnixNano()%1_000_000_000)
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func getenv(k string) string { return os.Getenv(k) }

func waitFor(t *testing.T, what string, cond func() bool) { t.Helper(); testkit.WaitFor(t, what, cond) }
