package mqtt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

func srcCfg(url, clientID string, topics ...string) map[string]any {
	return map[string]any{"broker": url, "client_id": clientID, "topics": topics, "qos": 1}
}

func openSource(t *testing.T, cfg map[string]any) *Source {
	t.Helper()
	s := NewSource()
	if err := s.Open(ctxT(t), sdktest.SourceEnv(t, cfg, nil, nil)); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// readN reads batches until n messages came, acknowledging none of them.
func readN(t *testing.T, s *Source, n int) ([]sdk.ProducedMessage, []sdk.AckFunc) {
	t.Helper()
	var msgs []sdk.ProducedMessage
	var acks []sdk.AckFunc
	ctx := ctxT(t)
	for len(msgs) < n {
		b, ack, err := s.Read(ctx)
		if err != nil {
			t.Fatalf("read after %d of %d messages: %v", len(msgs), n, err)
		}
		msgs = append(msgs, b.Messages...)
		acks = append(acks, ack)
	}
	if len(msgs) != n {
		t.Fatalf("read %d messages, want %d", len(msgs), n)
	}
	return msgs, acks
}

func payloads(msgs []sdk.ProducedMessage) string {
	var ps []string
	for _, m := range msgs {
		ps = append(ps, string(m.Payload))
	}
	return strings.Join(ps, ",")
}

func header(t *testing.T, m sdk.ProducedMessage, key string) sdk.HeaderField {
	t.Helper()
	f, ok := sdk.Lookup(m.Headers, key)
	if !ok {
		t.Fatalf("no header %s in %v", key, m.Headers)
	}
	return f
}

// TestSourceWithholdsAckUntilIggyHasIt: Paho's manual ack really withholds the PUBACK. A
// source that read five messages and is gone before their batch was acknowledged (as
// when Iggy never confirmed it, or the process died) gets all five again from the broker
// at the next connect with the same client id, marked DUP; once acknowledged, they never
// come again.
func TestSourceWithholdsAckUntilIggyHasIt(t *testing.T) {
	url := broker(t)
	id, topic := uniq(t), "ferry/"+uniq(t)+"/a"
	cfg := srcCfg(url, id, "ferry/"+strings.Split(topic, "/")[1]+"/#")
	first := openSource(t, cfg)
	publish(t, url, topic, 1, false, "m0", "m1", "m2", "m3", "m4")
	msgs, _ := readN(t, first, 5)
	if got := payloads(msgs); got != "m0,m1,m2,m3,m4" {
		t.Fatalf("first read %s", got)
	}
	if d := header(t, msgs[0], HeaderDuplicate); d.Value[0] != 0 {
		t.Fatalf("first delivery marked DUP")
	}
	_ = first.Close(context.Background()) // no ack: the broker still holds all five

	second := openSource(t, cfg)
	again, acks := readN(t, second, 5)
	if got := payloads(again); got != "m0,m1,m2,m3,m4" {
		t.Fatalf("redelivered %s, want m0..m4", got)
	}
	for _, m := range again {
		if d := header(t, m, HeaderDuplicate); d.Value[0] != 1 {
			t.Fatalf("redelivery of %s not marked DUP", m.Payload)
		}
	}
	for _, ack := range acks {
		if err := ack(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, url, topic, 1, false, "m5") // a marker: what comes before it was redelivered
	tail, acks := readN(t, second, 1)
	if got := payloads(tail); got != "m5" {
		t.Fatalf("after the ack got %s, want m5 alone", got)
	}
	_ = acks[0](context.Background(), nil)
	_ = second.Close(context.Background())

	third := openSource(t, cfg)
	publish(t, url, topic, 1, false, "m6")
	last, _ := readN(t, third, 1)
	if got := payloads(last); got != "m6" {
		t.Fatalf("a third session got %s, want only m6 (m0..m5 were acknowledged)", got)
	}
}

// TestSourceNackReadsAgain: a batch the runtime did not deliver comes back first, whole
// and in order, before anything received after it.
func TestSourceNackReadsAgain(t *testing.T) {
	url := broker(t)
	root := "ferry/" + uniq(t)
	s := openSource(t, srcCfg(url, uniq(t), root+"/#"))
	publish(t, url, root+"/x", 1, false, "a", "b", "c")
	msgs, acks := readN(t, s, 3)
	publish(t, url, root+"/x", 1, false, "d")
	testkit.WaitFor(t, "the fourth message received", func() bool { return s.received.Load() == 4 })
	for _, ack := range acks {
		_ = ack(context.Background(), errors.New("not delivered"))
	}
	again, _ := readN(t, s, 4)
	if got := payloads(again); got != payloads(msgs)+",d" {
		t.Fatalf("after a nack read %s, want a,b,c,d", got)
	}
}

// TestSourceHeadersAndRetained: each message carries its topic, QoS, retained and DUP
// flags and packet id; partition key the topic. retained = false drops retained messages
// (acknowledged, not sent).
func TestSourceHeadersAndRetained(t *testing.T) {
	url := broker(t)
	root := "ferry/" + uniq(t)
	publish(t, url, root+"/kept", 1, true, "retained-value")
	t.Cleanup(func() { publish(t, url, root+"/kept", 1, true, "") }) // clears the retained message
	with := openSource(t, srcCfg(url, uniq(t), root+"/#"))
	msgs, _ := readN(t, with, 1)
	m := msgs[0]
	if string(m.Payload) != "retained-value" || string(m.PartitionKey) != root+"/kept" {
		t.Fatalf("retained message %q key %q", m.Payload, m.PartitionKey)
	}
	if v, _ := header(t, m, HeaderTopic).AsString(); v != root+"/kept" {
		t.Fatalf("mqtt_topic %q", v)
	}
	if f := header(t, m, HeaderQoS); f.Kind != sdk.HeaderUint8 || f.Value[0] != 1 {
		t.Fatalf("mqtt_qos %v", f)
	}
	if f := header(t, m, HeaderRetained); f.Kind != sdk.HeaderBool || f.Value[0] != 1 {
		t.Fatalf("mqtt_retained %v", f)
	}
	if f := header(t, m, HeaderMessageID); f.Kind != sdk.HeaderUint16 || (f.Value[0] == 0 && f.Value[1] == 0) {
		t.Fatalf("mqtt_message_id %v", f)
	}

	cfg := srcCfg(url, uniq(t), root+"/#")
	cfg["retained"] = false
	without := openSource(t, cfg)
	publish(t, url, root+"/live", 1, false, "live")
	got, _ := readN(t, without, 1)
	if string(got[0].Payload) != "live" || without.dropped.Load() != 1 {
		t.Fatalf("retained = false read %q, dropped %d; want live and 1", got[0].Payload, without.dropped.Load())
	}
}

// TestSourceCrashAtEveryStep runs the source through sdktest's harness with a crash at
// every step (the instance gone without its ack or Close): every published message is in
// the topic at least once, and each MQTT topic's messages are first seen in order.
func TestSourceCrashAtEveryStep(t *testing.T) {
	url := broker(t)
	root := "ferry/" + uniq(t)
	id := uniq(t)
	const perTopic = 40
	topics := []string{root + "/a", root + "/b", root + "/c"}
	cfg := map[string]any{"broker": url, "client_id": id, "topics": []string{root + "/#"}, "qos": 1, "batch_size": 16}
	// The persistent session and its subscription exist before the first publish.
	_ = openSource(t, cfg).Close(context.Background())
	var last *Source
	run := 0
	sdktest.SourceHarness{
		New: func() sdk.Source {
			if last != nil {
				_ = last.Close(context.Background()) // the crashed instance's connection dies with it
			}
			last = NewSource()
			return last
		},
		Config: cfg,
		Reset: func(context.Context) error {
			run++
			for _, tp := range topics {
				var ps []string
				for i := range perTopic {
					ps = append(ps, fmt.Sprintf("%d:%s:%d", run, tp, i))
				}
				publish(t, url, tp, 1, false, ps...)
			}
			return nil
		},
		Done: func(log *sdktest.Log) bool {
			return len(firstSeen(log, run)) == len(topics)*perTopic
		},
		Check: func(t *testing.T, log *sdktest.Log) {
			seen := firstSeen(log, run)
			if len(seen) != len(topics)*perTopic {
				t.Fatalf("%d distinct messages of run %d, want %d", len(seen), run, len(topics)*perTopic)
			}
			for _, p := range []int{0, 1, 2} {
				next := map[string]int{}
				for _, st := range log.Partition(p) {
					r, tp, i, ok := parseSeq(string(st.Message.Payload))
					if !ok || r != run {
						continue
					}
					switch {
					case i == next[tp]:
						next[tp]++
					case i > next[tp]:
						t.Fatalf("partition %d: %s message %d before %d", p, tp, i, next[tp])
					}
				}
			}
			n := 0
			for _, st := range log.All() {
				if r, _, _, ok := parseSeq(string(st.Message.Payload)); ok && r == run {
					n++
				}
			}
			t.Logf("run %d: %d messages in the topic for %d published (%d duplicates)", run, n, len(seen), n-len(seen))
		},
	}.CrashAtEveryStep(t)
	if last != nil {
		_ = last.Close(context.Background())
	}
}

// firstSeen returns the distinct payloads of run in the log.
func firstSeen(log *sdktest.Log, run int) map[string]bool {
	seen := map[string]bool{}
	for _, st := range log.All() {
		if r, _, _, ok := parseSeq(string(st.Message.Payload)); ok && r == run {
			seen[string(st.Message.Payload)] = true
		}
	}
	return seen
}

func parseSeq(p string) (run int, topic string, i int, ok bool) {
	parts := strings.Split(p, ":")
	if len(parts) != 3 {
		return 0, "", 0, false
	}
	r, err1 := strconv.Atoi(parts[0])
	n, err2 := strconv.Atoi(parts[2])
	return r, parts[1], n, err1 == nil && err2 == nil
}

// TestSourceOpenErrors: a broker that is down, a refused login and a bad filter each
// fail Open with an error naming what and where.
func TestSourceOpenErrors(t *testing.T) {
	url := broker(t)
	down := "tcp://" + freeAddr(t)
	cases := []struct {
		name      string
		cfg       map[string]any
		want      []string
		permanent bool
	}{
		{"broker down", map[string]any{"broker": down, "topics": []string{"a"}, "connect_attempts": 2, "connect_timeout": "1s"},
			[]string{`mqtt source "test": connect to ` + down, "connection refused"}, false},
		{"bad filter", map[string]any{"broker": url, "topics": []string{"a/#/b"}},
			[]string{"plugin_config.topics", `topic filter "a/#/b": # must be the last level`}, true},
		{"two brokers keys", map[string]any{"broker": url, "brokers": []string{url}, "topics": []string{"a"}},
			[]string{"broker", "brokers"}, true},
	}
	if auth := getenv("FERRY_MQTT_AUTH_URL"); auth != "" {
		cases = append(cases, struct {
			name      string
			cfg       map[string]any
			want      []string
			permanent bool
		}{"refused login", map[string]any{"broker": auth, "topics": []string{"a"}, "username": getenv("FERRY_MQTT_USER"), "password": "wrong-password"},
			[]string{`mqtt source "test": connect to ` + auth, `the broker refused the login of user "` + getenv("FERRY_MQTT_USER") + `"`}, true})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewSource()
			defer s.Close(context.Background())
			err := s.Open(ctxT(t), sdktest.SourceEnv(t, c.cfg, nil, nil))
			if err == nil {
				t.Fatal("open succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "wrong-password") {
				t.Errorf("error %q shows the password", err)
			}
			if got := errors.Is(err, sdk.ErrPermanent); got != c.permanent {
				t.Errorf("permanent = %v, want %v (%v)", got, c.permanent, err)
			}
		})
	}
}
