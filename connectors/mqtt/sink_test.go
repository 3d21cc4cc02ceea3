package mqtt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

func openSink(t *testing.T, cfg map[string]any, c *sdktest.Committer, onFailure sdk.OnFailure) *Sink {
	t.Helper()
	s := NewSink()
	env := sdktest.SinkEnv(t, cfg, c)
	env.OnFailure = onFailure
	if err := s.Open(ctxT(t), env); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func deviceMessages(n int, missingHeaderAt int) []sdk.ConsumedMessage {
	msgs := sdktest.Messages(0, 0, uint64(n), func(_ uint32, o uint64) []byte {
		return fmt.Appendf(nil, `{"kind":"temp","o":%d}`, o)
	})
	for i := range msgs {
		if i != missingHeaderAt {
			msgs[i].Headers = []sdk.Header{{Key: sdk.String("device"), Value: sdk.String("d1")}}
		}
	}
	return msgs
}

// TestSinkPublishesThenCommits: each message goes to the topic its template renders
// (stream, topic, partition, a header, a JSON field), payload as is, read by mosquitto_sub;
// the batch's last offset is committed once the broker acknowledged every publish.
func TestSinkPublishesThenCommits(t *testing.T) {
	url := broker(t)
	root := "ferry/" + uniq(t)
	sub := subscribe(t, url, root+"/#", root+"/probe")
	c := sdktest.NewCommitter()
	p := sdktest.Part(0)
	c.Assign(p, 0)
	for _, qos := range []int{1, 2} {
		sub.reset()
		s := openSink(t, map[string]any{"broker": url, "qos": qos, "client_id": uniq(t),
			"topic": root + "/{stream}/{topic}/{partition}/{header:device}/{json:kind}"}, c, sdk.FailureStop)
		from := uint64(5 * (qos - 1))
		msgs := sdktest.Messages(0, from, 5, func(_ uint32, o uint64) []byte { return fmt.Appendf(nil, `{"kind":"temp","o":%d}`, o) })
		for i := range msgs {
			msgs[i].Headers = []sdk.Header{{Key: sdk.String("device"), Value: sdk.String("d1")}}
		}
		if err := sdktest.Consume(ctxT(t), s, c, sdktest.Topic, p, msgs); err != nil {
			t.Fatalf("qos %d: consume: %v", qos, err)
		}
		if off, ok := c.Committed(p); !ok || off != from+4 {
			t.Fatalf("qos %d: committed %d %v, want %d", qos, off, ok, from+4)
		}
		topic := fmt.Sprintf("%s/%s/%s/0/d1/temp", root, sdktest.Topic.Stream, sdktest.Topic.Topic)
		var want []string
		for o := from; o < from+5; o++ {
			want = append(want, fmt.Sprintf(`%s {"kind":"temp","o":%d}`, topic, o))
		}
		testWaitLines(t, sub, len(want))
		if got := sub.got(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("qos %d: mosquitto_sub read\n%s\nwant\n%s", qos, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func testWaitLines(t *testing.T, sub *subscriber, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d messages at mosquitto_sub", n), func() bool { return len(sub.got()) >= n })
}

// TestSinkRejectsWhatItCannotRoute: a message whose template names a header it lacks is
// rejected alone. Under skip the others are published and the batch committed; under stop
// nothing at or past it is committed.
func TestSinkRejectsWhatItCannotRoute(t *testing.T) {
	url := broker(t)
	root := "ferry/" + uniq(t)
	sub := subscribe(t, url, root+"/#", root+"/probe")
	for _, tc := range []struct {
		fail      sdk.OnFailure
		committed uint64
		published int
	}{{sdk.FailureSkip, 4, 4}, {sdk.FailureStop, 1, 2}} {
		sub.reset()
		c := sdktest.NewCommitter()
		p := sdktest.Part(0)
		c.Assign(p, 0)
		s := openSink(t, map[string]any{"broker": url, "client_id": uniq(t), "topic": root + "/{header:device}"}, c, tc.fail)
		err := sdktest.Consume(ctxT(t), s, c, sdktest.Topic, p, deviceMessages(5, 2))
		var rej *sdk.RejectedMessages
		if !errors.As(err, &rej) || fmt.Sprint(rej.Offsets) != "[2]" || !strings.Contains(err.Error(), `offset 2: plugin_config.topic: no header "device"`) {
			t.Fatalf("%s: consume returned %v, want offset 2 rejected for its missing header", tc.fail, err)
		}
		if off, ok := c.Committed(p); !ok || off != tc.committed {
			t.Fatalf("%s: committed %d %v, want %d", tc.fail, off, ok, tc.committed)
		}
		testWaitLines(t, sub, tc.published)
		if got := len(sub.got()); got != tc.published {
			t.Fatalf("%s: %d published, want %d", tc.fail, got, tc.published)
		}
		_ = s.Close(context.Background())
	}
}

// TestSinkCrashAtEveryStep: sdktest's harness with a crash at every step, the broker's
// subscriber as the judge: every message at least once.
func TestSinkCrashAtEveryStep(t *testing.T) {
	url := broker(t)
	root := "ferry/" + uniq(t)
	sub := subscribe(t, url, root+"/#", root+"/probe")
	var last *Sink
	t.Cleanup(func() {
		if last != nil {
			_ = last.Close(context.Background())
		}
	})
	sdktest.SinkHarness{
		New: func() sdk.Sink {
			if last != nil {
				_ = last.Close(context.Background()) // a dead process's connection ends with it
			}
			last = NewSink()
			return last
		},
		Config:         map[string]any{"broker": url, "topic": root + "/{partition}", "qos": 1},
		SinkControlled: true,
		Guarantee:      sdktest.AtLeastOnce,
		Reset:          func(context.Context) error { sub.reset(); return nil },
		Read: func(context.Context) ([]sdktest.Record, error) {
			// The broker acknowledges a publish before it delivers it to the subscriber:
			// wait until all 90 messages arrived, or Patience passed (then the check
			// names what is missing).
			_ = testkit.Eventually("every message at mosquitto_sub", func() bool { return distinct(sub.got()) >= 90 })
			var recs []sdktest.Record
			for _, l := range sub.got() {
				_, payload, _ := strings.Cut(l, " ")
				var v struct{ P, O uint64 }
				if err := json.Unmarshal([]byte(payload), &v); err != nil {
					return nil, fmt.Errorf("%q: %w", l, err)
				}
				recs = append(recs, sdktest.Record{Partition: uint32(v.P), Offset: v.O, Payload: []byte(payload)})
			}
			return recs, nil
		},
	}.CrashAtEveryStep(t)
}

func distinct(lines []string) int {
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	return len(seen)
}

// TestSinkOpenErrors: a broker that is down and a refused login fail Open naming the
// connector, the broker and the user; a bad template fails the config.
func TestSinkOpenErrors(t *testing.T) {
	down := "tcp://" + freeAddr(t)
	cases := []struct {
		name string
		cfg  map[string]any
		want []string
	}{
		{"broker down", map[string]any{"broker": down, "topic": "a", "connect_attempts": 1}, []string{`mqtt sink "test": connect to ` + down, "connection refused"}},
		{"bad template", map[string]any{"broker": down, "topic": "a/{nope}"}, []string{"plugin_config.topic", "unknown field {nope}"}},
		{"wildcard", map[string]any{"broker": down, "topic": "a/+"}, []string{"plugin_config.topic", "cannot hold + #"}},
	}
	if auth := getenv("FERRY_MQTT_AUTH_URL"); auth != "" {
		broker(t)
		cases = append(cases, struct {
			name string
			cfg  map[string]any
			want []string
		}{"refused login", map[string]any{"broker": auth, "topic": "a", "username": "nobody", "password": "wrong-password"},
			[]string{`connect to ` + auth, `the broker refused the login of user "nobody"`}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewSink()
			defer s.Close(context.Background())
			err := s.Open(ctxT(t), sdktest.SinkEnv(t, c.cfg, nil))
			if err == nil {
				t.Fatal("open succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
