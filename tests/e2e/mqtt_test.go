package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
)

// mqttBroker returns the broker of scripts/mosquitto.sh (FERRY_MQTT_URL) and the Python
// with paho-mqtt (FERRY_PAHO_PYTHON): skipped when FERRY_MQTT_URL is unset, failed when
// the broker is down or the Python is missing.
func mqttBroker(t testing.TB) (brokerURL, python string) {
	t.Helper()
	brokerURL, python = os.Getenv("FERRY_MQTT_URL"), os.Getenv("FERRY_PAHO_PYTHON")
	if brokerURL == "" {
		t.Skip(`FERRY_MQTT_URL is not set (eval "$(bash scripts/mosquitto.sh start)"; eval "$(bash scripts/mosquitto.sh paho)")`)
	}
	if python == "" {
		t.Fatal(`FERRY_MQTT_URL is set but FERRY_PAHO_PYTHON is not (eval "$(bash scripts/mosquitto.sh paho)")`)
	}
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "mosquitto_pub", "-h", u.Hostname(), "-p", u.Port(), "-t", "ferry/ping", "-m", "x").CombinedOutput(); err != nil {
		t.Fatalf("FERRY_MQTT_URL is set but the broker does not answer: %v %s", err, out)
	}
	return brokerURL, python
}

// mqttPublish publishes messages first..last-1 with testdata/mqtt_publish.py (paho-mqtt).
func mqttPublish(brokerURL, python, prefix string, topics, first, last int) error {
	u, _ := url.Parse(brokerURL)
	cmd := exec.Command(python, "testdata/mqtt_publish.py", u.Hostname(), u.Port(), prefix, strconv.Itoa(topics), strconv.Itoa(first), strconv.Itoa(last))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("publish %d..%d: %w\n%s", first, last, err, out)
	}
	return nil
}

// mqttBrokerRestart restarts the broker gracefully (it saves its sessions).
func mqttBrokerRestart() error {
	if out, err := exec.Command("bash", "../../scripts/mosquitto.sh", "restart").CombinedOutput(); err != nil {
		return fmt.Errorf("restart the broker: %w\n%s", err, out)
	}
	return nil
}

func mqttSource(brokerURL, clientID, filter string, extra string) string {
	return fmt.Sprintf(`type = "source"
key = "mq"
enabled = true
version = 0
name = "mqtt in"
path = "builtin:mqtt"

[[streams]]
stream = "s"
topic = "mqtt"
schema = "raw"
batch_length = 1000

[plugin_config]
broker = %q
client_id = %q
topics = [%q]
qos = 1
%s`, brokerURL, clientID, filter, extra)
}

// mqttRun is the size of one MQTT source soak. CI runs mqttSmall; FERRY_MQTT_SOAK=1 the
// issue's size: 30,000 QoS 1 messages on 50 topics, 10 kills, the broker restarted once.
type mqttRun struct{ messages, topics, kills, restartAfter int }

var (
	mqttSmall = mqttRun{messages: 6000, topics: 10, kills: 4, restartAfter: 2}
	mqttSoak  = mqttRun{messages: 30000, topics: 50, kills: 10, restartAfter: 5}
)

// TestMQTTSourceAtLeastOnceUnderSIGKILL: a paho-mqtt publisher sends numbered QoS 1
// messages on many topics while the ferry process running the MQTT source is SIGKILLed
// again and again and the broker is restarted once. Every message is in Iggy at least
// once, each topic's messages are first seen in order, and the duplicates stay within the
// broker's in-flight window per kill and restart.
func TestMQTTSourceAtLeastOnceUnderSIGKILL(t *testing.T) {
	size := mqttSmall
	if v, _ := strconv.ParseBool(os.Getenv("FERRY_MQTT_SOAK")); v {
		size = mqttSoak
	}
	brokerURL, python := mqttBroker(t)
	window, _ := strconv.Atoi(os.Getenv("FERRY_MQTT_INFLIGHT"))
	if window <= 0 {
		window = 1000 // scripts/mosquitto.sh's max_inflight_messages
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	prefix := fmt.Sprintf("ferry-e2e/%d", seed%1_000_000_000)

	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createMQTTTopic(t, c)
	conns := filepath.Join(dir, "conns")
	writeFile(t, filepath.Join(conns, "mq.toml"), mqttSource(brokerURL, "ferry-e2e-"+strconv.FormatUint(seed, 36), prefix+"/#", ""))
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}
	subscribed := func(p *proc) {
		testkit.WaitFor(t, p.name+" subscribed", func() bool {
			if p.exited() {
				t.Fatalf("%s exited: %v\n%s", p.name, p.err, tail(p.out.String(), 30))
			}
			return strings.Contains(p.out.String(), "mqtt source subscribed")
		})
	}
	run := startFerry(t, "run 0", dir, nil, args...)
	subscribed(run) // the persistent session exists: everything published from now on is kept for it

	// The publisher sends in chunks; the broker restart happens between two chunks, so
	// the publisher itself never sends a message twice.
	restart := make(chan struct{}, 1)
	restarted := make(chan struct{})
	var pubErr error          // the publisher's, read after wg.Wait
	var pubFailed atomic.Bool // read meanwhile
	var wg sync.WaitGroup
	chunk := 500
	wg.Go(func() {
		for from := 0; from < size.messages; from += chunk {
			select {
			case <-restart:
				pubErr = mqttBrokerRestart()
				close(restarted)
				if pubErr != nil {
					pubFailed.Store(true)
					return
				}
			default:
			}
			if pubErr = mqttPublish(brokerURL, python, prefix, size.topics, from, min(from+chunk, size.messages)); pubErr != nil {
				pubFailed.Store(true)
				return
			}
		}
	})
	share := uint64(size.messages / (size.kills + 1))
	for i := 1; i <= size.kills; i++ {
		before := topicMessages(c, "mqtt")
		testkit.WaitFor(t, fmt.Sprintf("run %d sending", i-1), func() bool {
			if run.exited() {
				t.Fatalf("run %d exited by itself: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
			}
			return topicMessages(c, "mqtt") >= before+share/2 || pubFailed.Load()
		})
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		run.kill()
		t.Logf("kill %d: %d messages in the topic", i, topicMessages(c, "mqtt"))
		if i == size.restartAfter {
			restart <- struct{}{}
			<-restarted
			if pubFailed.Load() {
				wg.Wait()
				t.Fatal(pubErr)
			}
			t.Logf("broker restarted after kill %d", i)
		}
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
	}
	wg.Wait()
	if pubErr != nil {
		t.Fatal(pubErr)
	}
	var got map[int][]int
	testkit.WaitFor(t, "every published message in the topic", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		if topicMessages(c, "mqtt") < uint64(size.messages) {
			return false
		}
		got = readMQTTTopic(t, c)
		n := 0
		for _, seqs := range got {
			n += len(distinctInts(seqs))
		}
		return n == size.messages
	})
	run.stop(15 * time.Second)
	got = readMQTTTopic(t, c)
	total, dups := 0, 0
	for k := range size.topics {
		seqs := got[k]
		want := size.messages / size.topics
		if k < size.messages%size.topics {
			want++
		}
		next := 0
		for _, j := range seqs {
			switch {
			case j == next:
				next++
			case j > next:
				t.Fatalf("topic t%d: message %d before %d (a gap, or out of order)", k, j, next)
			default:
				dups++
			}
		}
		if next != want {
			t.Fatalf("topic t%d: %d messages first seen, want %d", k, next, want)
		}
		total += len(seqs)
	}
	bound := (size.kills + 1) * window
	if dups > bound {
		t.Fatalf("%d duplicates, more than (kills + restart) × the in-flight window = %d", dups, bound)
	}
	t.Logf("%d messages on %d topics, %d kills, 1 broker restart: %d in Iggy, 0 lost, %d duplicates (bound %d: %d per kill or restart)",
		size.messages, size.topics, size.kills, total, dups, bound, window)
}

// createMQTTTopic creates stream s, topic mqtt of 3 partitions.
func createMQTTTopic(t *testing.T, c *iggy.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CreateStream(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, iggy.Name("s"), "mqtt", 3); err != nil {
		t.Fatal(err)
	}
}

// readMQTTTopic reads s/mqtt whole: for each MQTT topic number, the per-topic indexes in
// the order of their partition.
func readMQTTTopic(t *testing.T, c *iggy.Client) map[int][]int {
	t.Helper()
	return readPairs(t, c, "mqtt", "t%d:%d")
}

func distinctInts(xs []int) map[int]bool {
	m := make(map[int]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// TestMQTTAndHTTPErrorsNameWhere: `ferry run` with an MQTT source whose broker is down, one
// whose login the broker refuses, and an HTTP sink whose URL nothing answers: each fails
// to start with a line naming the connector, the broker or URL and what went wrong (the
// refused login for good, the others retried by the restart policy), and no password is
// logged.
func TestMQTTAndHTTPErrorsNameWhere(t *testing.T) {
	mqttBroker(t)
	auth := os.Getenv("FERRY_MQTT_AUTH_URL")
	if auth == "" {
		t.Fatal("FERRY_MQTT_URL is set but FERRY_MQTT_AUTH_URL is not (eval the whole output of scripts/mosquitto.sh start)")
	}
	down := "127.0.0.1:" + strconv.Itoa(freePort(t))
	dir := t.TempDir()
	conns := filepath.Join(dir, "conns")
	writeFile(t, filepath.Join(conns, "down.toml"), strings.Replace(mqttSource("tcp://"+down, "e2e-down", "a/#", "connect_attempts = 1\n"), `key = "mq"`, `key = "down"`, 1))
	writeFile(t, filepath.Join(conns, "login.toml"), strings.Replace(mqttSource(auth, "e2e-login", "a/#", "username = \"ferry\"\npassword = \"not-the-password\"\n"), `key = "mq"`, `key = "login"`, 1))
	writeFile(t, filepath.Join(conns, "hook.toml"), httpSink("http://"+down+"/hook", "ndjson", 10)+"health_check_enabled = true\n")
	run := startFerry(t, "run", dir, nil, "run", "--config", runtimeConfig(t, dir, conns), "--embedded")
	want := []string{
		`mqtt source \"down\": connect to tcp://` + down,
		"connection refused",
		`mqtt source \"login\": connect to ` + auth,
		`the broker refused the login of user \"ferry\"`,
		"http sink: health check HEAD http://" + down + "/hook",
	}
	testkit.WaitFor(t, "the three start errors", func() bool {
		out := run.out.String()
		for _, w := range want {
			if !strings.Contains(out, w) {
				return false
			}
		}
		return true
	})
	if !run.exited() {
		run.kill() // a run whose every connector failed at start exits 1 by itself
	}
	if strings.Contains(run.out.String(), "not-the-password") {
		t.Fatal("the password was logged")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestMQTTSourceMappedTopicsUnderSIGKILL: the MQTT source with two topic_mapping tables (a
// fixed Iggy topic for one MQTT topic, a template over the levels for the rest) while a
// paho-mqtt publisher sends numbered QoS 1 messages on two MQTT topics and ferry is
// SIGKILLed 3 times. Read back from Iggy: each MQTT topic's messages are all in their own
// mapped topic, with their payloads and mqtt_topic header, first seen in order, none in the
// [[streams]] entry's topic, the duplicates within the in-flight window per kill: the
// guarantee of the unmapped source, kept across mapped topics.
func TestMQTTSourceMappedTopicsUnderSIGKILL(t *testing.T) {
	brokerURL, python := mqttBroker(t)
	window, _ := strconv.Atoi(os.Getenv("FERRY_MQTT_INFLIGHT"))
	if window <= 0 {
		window = 1000
	}
	const messages, kills = 3000, 3
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	prefix := fmt.Sprintf("ferry-e2e-map/%d", seed%1_000_000_000) // two levels: the MQTT topic's third is t0 or t1

	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createMQTTTopic(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tp := range []string{"fixed", "lvl-t1"} {
		if _, err := c.CreateTopic(ctx, iggy.Name("s"), tp, 3); err != nil {
			t.Fatal(err)
		}
	}
	mapping := fmt.Sprintf(`
[[plugin_config.topic_mapping]]
filter = %q
topic = "fixed"

[[plugin_config.topic_mapping]]
filter = %q
topic = "lvl-{3}"
`, prefix+"/t0", prefix+"/+")
	conns := filepath.Join(dir, "conns")
	writeFile(t, filepath.Join(conns, "mq.toml"), mqttSource(brokerURL, "ferry-e2e-map-"+strconv.FormatUint(seed, 36), prefix+"/#", "")+mapping)
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}
	run := startFerry(t, "run 0", dir, nil, args...)
	testkit.WaitFor(t, "run 0 subscribed", func() bool {
		if run.exited() {
			t.Fatalf("run 0 exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return strings.Contains(run.out.String(), "mqtt source subscribed")
	})
	mapped := func() uint64 { return topicMessages(c, "fixed") + topicMessages(c, "lvl-t1") }

	var pubErr error
	var pubFailed atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for from := 0; from < messages; from += 500 {
			if pubErr = mqttPublish(brokerURL, python, prefix, 2, from, min(from+500, messages)); pubErr != nil {
				pubFailed.Store(true)
				return
			}
		}
	})
	share := uint64(messages / (kills + 1))
	for i := 1; i <= kills; i++ {
		before := mapped()
		testkit.WaitFor(t, fmt.Sprintf("run %d sending", i-1), func() bool {
			if run.exited() {
				t.Fatalf("run %d exited by itself: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
			}
			return mapped() >= before+share/2 || pubFailed.Load()
		})
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		run.kill()
		t.Logf("kill %d: %d messages in the mapped topics", i, mapped())
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
	}
	wg.Wait()
	if pubErr != nil {
		t.Fatal(pubErr)
	}
	read := func() (fixed, lvl map[int][]int) {
		return readMappedTopic(t, c, "fixed", prefix), readMappedTopic(t, c, "lvl-t1", prefix)
	}
	testkit.WaitFor(t, "every published message in its mapped topic", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		if mapped() < messages {
			return false
		}
		fixed, lvl := read()
		return len(distinctInts(fixed[0])) == messages/2 && len(distinctInts(lvl[1])) == messages/2
	})
	run.stop(15 * time.Second)
	fixed, lvl := read()
	if len(fixed) != 1 || len(lvl) != 1 {
		t.Fatalf("MQTT topics in fixed: %d, in lvl-t1: %d; want t0 alone and t1 alone", len(fixed), len(lvl))
	}
	if n := topicMessages(c, "mqtt"); n != 0 {
		t.Fatalf("%d messages in the [[streams]] entry's topic, want 0 (every MQTT topic is mapped)", n)
	}
	dups := 0
	for k, seqs := range map[int][]int{0: fixed[0], 1: lvl[1]} {
		next := 0
		for _, j := range seqs {
			switch {
			case j == next:
				next++
			case j > next:
				t.Fatalf("MQTT topic t%d: message %d before %d (a gap, or out of order)", k, j, next)
			default:
				dups++
			}
		}
		if next != messages/2 {
			t.Fatalf("MQTT topic t%d: %d messages first seen, want %d", k, next, messages/2)
		}
	}
	if bound := (kills + 1) * window; dups > bound {
		t.Fatalf("%d duplicates, more than (kills + 1) × the in-flight window = %d", dups, bound)
	}
	t.Logf("%d messages on 2 MQTT topics mapped to s/fixed and s/lvl-t1, %d kills: 0 lost, %d duplicates", messages, kills, dups)
}

// readMappedTopic reads s/topic whole: for each MQTT topic number k, the indexes of its
// messages ("t<k>:<i>") in the order of their partition. Each message's mqtt_topic header
// must be prefix/t<k>.
func readMappedTopic(t *testing.T, c *iggy.Client, topic, prefix string) map[int][]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := map[int][]int{}
	var kvs []wire.KV
	for p := range uint32(3) {
		next := uint64(0)
		for {
			part := p
			res, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)},
				Stream: iggy.Name("s"), Topic: iggy.Name(topic), Partition: &part, Strategy: wire.PollOffset(next), Count: 1000})
			if err != nil {
				t.Fatalf("read %s partition %d at %d: %v", topic, p, next, err)
			}
			if len(res.Messages) == 0 {
				res.Release()
				break
			}
			for _, m := range res.Messages {
				var k, i int
				if _, err := fmt.Sscanf(string(m.Payload), "t%d:%d", &k, &i); err != nil {
					t.Fatalf("%s partition %d offset %d: payload %q", topic, p, m.Offset, m.Payload)
				}
				if kvs, err = m.Headers(kvs[:0]); err != nil {
					t.Fatalf("%s partition %d offset %d: headers: %v", topic, p, m.Offset, err)
				}
				mqttTopic := ""
				for _, kv := range kvs {
					if string(kv.Key.Raw) == "mqtt_topic" {
						mqttTopic = string(kv.Value.Raw)
					}
				}
				if want := fmt.Sprintf("%s/t%d", prefix, k); mqttTopic != want {
					t.Fatalf("%s partition %d offset %d: mqtt_topic %q, want %q", topic, p, m.Offset, mqttTopic, want)
				}
				out[k] = append(out[k], i)
				next = m.Offset + 1
			}
			res.Release()
		}
	}
	return out
}
