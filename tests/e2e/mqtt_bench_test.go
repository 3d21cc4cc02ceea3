package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/ferryio/ferry/internal/testkit"
)

// benchN is the messages of each side-by-side run.
const benchN = 100_000

// pahoConnect connects a Paho client: with an id, a persistent session (clean session
// off); without, a clean one.
func pahoConnect(t *testing.T, brokerURL, id string, handler paho.MessageHandler) paho.Client {
	t.Helper()
	o := paho.NewClientOptions().AddBroker(brokerURL).SetClientID(id).SetCleanSession(id == "").SetDefaultPublishHandler(handler)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("connect %s: %v", id, tok.Error())
	}
	return c
}

// preload publishes n QoS 1 messages of 100 bytes on prefix/t<i%10>, all acknowledged.
func preload(t *testing.T, brokerURL, prefix string, n int) {
	t.Helper()
	c := pahoConnect(t, brokerURL, "", nil)
	defer c.Disconnect(100)
	payload := bytes.Repeat([]byte("x"), 100)
	toks := make([]paho.Token, 0, 1000)
	for i := range n {
		toks = append(toks, c.Publish(fmt.Sprintf("%s/t%d", prefix, i%10), 1, false, payload))
		if len(toks) == cap(toks) || i == n-1 {
			for _, tok := range toks {
				if !tok.WaitTimeout(60*time.Second) || tok.Error() != nil {
					t.Fatalf("preload: %v", tok.Error())
				}
			}
			toks = toks[:0]
		}
	}
}

// TestMQTTThroughput (FERRY_MQTT_BENCH=1, scripts/bench.sh): messages/s from a broker's
// queue of 100,000 QoS 1 messages into Iggy through `ferry run` and the MQTT source,
// beside Paho's own subscriber draining the same kind of queue into a discarding handler
// (auto-ack), same broker, same run. Each side drains a persistent session's queue filled
// while it was away; the time runs from the first message to the last.
func TestMQTTThroughput(t *testing.T) {
	if v, _ := strconv.ParseBool(os.Getenv("FERRY_MQTT_BENCH")); !v {
		t.Skip("FERRY_MQTT_BENCH is not set (scripts/bench.sh sets it)")
	}
	brokerURL, _ := mqttBroker(t)
	stamp := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)

	// Paho alone.
	var got atomic.Int64
	var first, last atomic.Int64
	handler := func(_ paho.Client, _ paho.Message) {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		if got.Add(1) == benchN {
			last.Store(now)
		}
	}
	bareID, barePrefix := "bench-bare-"+stamp, "bench/bare-"+stamp
	c := pahoConnect(t, brokerURL, bareID, handler)
	if tok := c.Subscribe(barePrefix+"/#", 1, nil); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	c.Disconnect(100)
	preload(t, brokerURL, barePrefix, benchN)
	c = pahoConnect(t, brokerURL, bareID, handler)
	testkit.WaitFor(t, "Paho's subscriber draining the queue", func() bool { return last.Load() != 0 })
	c.Disconnect(100)
	bare := float64(benchN) / time.Duration(last.Load()-first.Load()).Seconds()

	// Ferry: the MQTT source into a ferry server.
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	ic := dial(t, addr)
	createMQTTTopic(t, ic)
	conns := filepath.Join(dir, "conns")
	prefix := "bench/ferry-" + stamp
	writeFile(t, filepath.Join(conns, "mq.toml"), mqttSource(brokerURL, "bench-ferry-"+stamp, prefix+"/#", "batch_size = 1000\n"))
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}
	run := startFerry(t, "run 0", dir, nil, args...)
	testkit.WaitFor(t, "the source subscribed", func() bool { return bytes.Contains([]byte(run.out.String()), []byte("mqtt source subscribed")) })
	run.stop(15 * time.Second)
	preload(t, brokerURL, prefix, benchN)
	run = startFerry(t, "run 1", dir, nil, args...)
	var start, end time.Time
	testkit.WaitFor(t, "the source draining the queue into Iggy", func() bool {
		n := topicMessages(ic, "mqtt")
		if n > 0 && start.IsZero() {
			start = time.Now()
		}
		if n >= benchN {
			end = time.Now()
			return true
		}
		return false
	})
	run.stop(15 * time.Second)
	ferry := float64(benchN) / end.Sub(start).Seconds()
	t.Logf("MQTT -> Iggy, QoS 1, %d messages of 100 B: ferry %.0f msgs/s, Paho into a discarding handler %.0f msgs/s: %.2f×",
		benchN, ferry, bare, ferry/bare)
}

// TestHTTPThroughput (FERRY_HTTP_BENCH=1, scripts/bench.sh): messages/s from Iggy to a
// local HTTP receiver through `ferry run` and the HTTP sink, ndjson batches of 1000, beside
// a bare loop posting the same bodies to the same receiver.
func TestHTTPThroughput(t *testing.T) {
	if v, _ := strconv.ParseBool(os.Getenv("FERRY_HTTP_BENCH")); !v {
		t.Skip("FERRY_HTTP_BENCH is not set (scripts/bench.sh sets it)")
	}
	const parts, perPartition = 3, 100_000
	var lines atomic.Int64
	var firstAt, lastAt atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		now := time.Now().UnixNano()
		firstAt.CompareAndSwap(0, now)
		if lines.Add(int64(bytes.Count(b, []byte("\n")))) >= parts*perPartition {
			lastAt.CompareAndSwap(0, now)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, parts)
	if err := producePadded(c, parts, 0, perPartition, 0, 80); err != nil {
		t.Fatal(err)
	}
	conns := filepath.Join(dir, "conns")
	writeFile(t, filepath.Join(conns, "hook.toml"), httpSink(srv.URL, "ndjson", 1000))
	run := startFerry(t, "run", dir, nil, "run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0")
	testkit.WaitFor(t, "every message at the receiver", func() bool { return lastAt.Load() != 0 })
	run.stop(15 * time.Second)
	ferry := float64(parts*perPartition) / time.Duration(lastAt.Load()-firstAt.Load()).Seconds()

	// The bare loop: the same number of 1000-line bodies of the same size, one at a time.
	body := bytes.Repeat([]byte(fmt.Sprintf(`{"metadata":{"iggy_id":"%032x","iggy_offset":123456,"iggy_timestamp":1700000000000000,"iggy_stream":"s","iggy_topic":"t","iggy_partition_id":0},"payload":{"p":0,"o":123456,"pad":"%080d"}}`+"\n", 1, 0)), 1000)
	lines.Store(0)
	start := time.Now()
	for range parts * perPartition / 1000 {
		resp, err := http.Post(srv.URL, "application/x-ndjson", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	bare := float64(parts*perPartition) / time.Since(start).Seconds()
	t.Logf("Iggy -> HTTP, ndjson batches of 1000, %d messages of ~250 B: ferry %.0f msgs/s, a bare POST loop %.0f msgs/s: %.2f×",
		parts*perPartition, ferry, bare, ferry/bare)
}
