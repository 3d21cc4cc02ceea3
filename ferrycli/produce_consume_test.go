package ferrycli

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
)

var sentRE = regexp.MustCompile(`^ferry: sent (\d+) messages to (\S+) in \S+( \(\d+/s\))?(; \d+ empty lines skipped)?\n$`)

// consumed parses consume's JSON lines into partition/offset/payload/headers.
func consumed(t *testing.T, out string) []string {
	t.Helper()
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m struct {
			Partition       uint32         `json:"partition"`
			Offset          uint64         `json:"offset"`
			ID              string         `json:"id"`
			Timestamp       uint64         `json:"timestamp"`
			OriginTimestamp uint64         `json:"origin_timestamp"`
			Headers         map[string]any `json:"headers"`
			Payload         *string        `json:"payload"`
			PayloadBase64   *string        `json:"payload_base64"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		if len(m.ID) != 32 || m.Timestamp == 0 || m.OriginTimestamp == 0 {
			t.Errorf("line %q: want a 32-digit id and both timestamps", line)
		}
		s := fmt.Sprintf("p%d o%d", m.Partition, m.Offset)
		if m.Payload != nil {
			s += " " + *m.Payload
		}
		if m.PayloadBase64 != nil {
			s += " b64:" + *m.PayloadBase64
		}
		if len(m.Headers) > 0 {
			h, _ := json.Marshal(m.Headers)
			s += " " + string(h)
		}
		got = append(got, s)
	}
	return got
}

func wantLines(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestProduceThenConsume: lines become messages (empty lines skipped) with the headers
// given, on the partition chosen by --partition, by --key as the SDKs hash it, or round
// robin; consume prints them from each start it offers, as JSON or raw.
func TestProduceThenConsume(t *testing.T) {
	kit := iggykit.Start(t)
	kit.Topic("demo", "events", 3)
	_, errOut, err := ferryCmd(kit.Ctx(), kit, "a\nb\n\nc\r\n", "produce", "demo", "events", "--partition", "1", "--header", "src=cli", "--header", "n=1")
	if err != nil {
		t.Fatal(err)
	}
	if m := sentRE.FindStringSubmatch(errOut); m == nil || m[1] != "3" || m[4] != "; 1 empty lines skipped" {
		t.Errorf("produce said %q", errOut)
	}
	out := mustFerry(t, kit, "", "consume", "demo", "events")
	wantLines(t, "consume", consumed(t, out),
		`p1 o0 a {"n":"1","src":"cli"}`, `p1 o1 b {"n":"1","src":"cli"}`, `p1 o2 c {"n":"1","src":"cli"}`)

	// --key: every message on the partition XXH32(key) % 3 names.
	mustFerry(t, kit, "k1\nk2\n", "produce", "demo", "events", "--key", "customer-42")
	kp := wire.PartitionForKey([]byte("customer-42"), 3)
	out = mustFerry(t, kit, "", "consume", "demo", "events", "--partition", fmt.Sprint(kp), "--format", "raw")
	if kp == 1 {
		out = strings.TrimPrefix(out, "a\nb\nc\n")
	}
	if out != "k1\nk2\n" {
		t.Errorf("partition %d by key holds %q, want k1, k2", kp, out)
	}

	// Round robin, a batch a partition: --batch 2 puts 6 lines on 3 partitions, two each.
	kit2 := iggykit.Start(t)
	kit2.Topic("rr", "t", 3)
	mustFerry(t, kit2, "1\n2\n3\n4\n5\n6\n", "produce", "rr", "t", "--batch", "2")
	td, err := kit2.Admin.GetTopic(kit2.Ctx(), iggy.Name("rr"), iggy.Name("t"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range td.Partitions {
		if p.MessagesCount != 2 {
			t.Errorf("partition %d holds %d messages, want 2", p.ID, p.MessagesCount)
		}
	}

	// Starts: --offset, --count, --end, --timestamp.
	wantLines(t, "--offset 1 --count 1", consumed(t, mustFerry(t, kit, "", "consume", "demo", "events", "--partition", "1", "--offset", "1", "--count", "1")),
		`p1 o1 b {"n":"1","src":"cli"}`)
	if out := mustFerry(t, kit, "", "consume", "demo", "events", "--end"); out != "" {
		t.Errorf("--end without -f printed %q", out)
	}
	r, err := kit.Admin.PollMessages(kit.Ctx(), iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)},
		Stream: iggy.Name("demo"), Topic: iggy.Name("events"), Partition: new(uint32(1)), Strategy: wire.PollOffset(0), Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	ts := r.Messages[0].Timestamp
	r.Release()
	wantLines(t, "--timestamp", consumed(t, mustFerry(t, kit, "", "consume", "demo", "events", "--partition", "1", "--timestamp", fmt.Sprint(ts), "--count", "1")),
		`p1 o0 a {"n":"1","src":"cli"}`)

	// A payload that is not UTF-8 is printed as base64; typed headers as JSON values.
	kit.Fill("demo", "events", 0, 1, func(int) []byte { return []byte{0xff, 0x00} },
		wire.StringKV("ok", wire.BoolValue(true)), wire.StringKV("count", wire.Uint64Value(7)))
	wantLines(t, "binary payload", consumed(t, mustFerry(t, kit, "", "consume", "demo", "events", "--partition", "0")),
		`p0 o0 b64:/wA= {"count":7,"ok":true}`)
}

// TestProduceRefuses: bad input is refused naming the line and byte, and nothing from it
// on is sent; a partition the topic lacks and a missing topic are named.
func TestProduceRefuses(t *testing.T) {
	kit := iggykit.Start(t)
	kit.Topic("demo", "events", 2)
	_, _, err := ferryCmd(kit.Ctx(), kit, "{\"a\":1}\n{bad\n{\"c\":3}\n", "produce", "demo", "events", "--format", "json", "--partition", "0")
	if want := `stdin line 2 byte 2: not JSON: invalid character 'b' looking for beginning of object key string (nothing from this line on was sent)`; err == nil || err.Error() != want {
		t.Errorf("bad JSON: %v\nwant %s", err, want)
	}
	if got := mustFerry(t, kit, "", "consume", "demo", "events", "--format", "raw"); got != "{\"a\":1}\n" {
		t.Errorf("after the refusal the topic holds %q, want the first line only", got)
	}
	wantErr(t, kit, `--partition 2: topic demo/events has 2 partitions (ids 0..1)`, "produce", "demo", "events", "--partition", "2")
	wantErr(t, kit, `iggy: get topic stream "demo" topic "nope": TopicIdNotFound (2010); no such topic: ferry topic list STREAM shows them, ferry topic create makes one`,
		"produce", "demo", "nope")
	wantErr(t, kit, `--header "novalue": want NAME=VALUE, each 1..255 bytes`, "produce", "demo", "events", "--header", "novalue")
	wantErr(t, kit, `--key and --partition: give one of them`, "produce", "demo", "events", "--key", "k", "--partition", "0")
	wantErr(t, kit, `--offset, --timestamp, --end and --consumer-group: give at most one`, "consume", "demo", "events", "--end", "--offset", "3")
	wantErr(t, kit, `--commit needs --consumer-group`, "consume", "demo", "events", "--commit")
}

// TestProduceManyLines: 100,000 lines arrive as 100,000 messages, in order per partition.
func TestProduceManyLines(t *testing.T) {
	kit := iggykit.Start(t)
	kit.Topic("bulk", "t", 1)
	var in strings.Builder
	for i := range 100_000 {
		fmt.Fprintf(&in, "%d\n", i)
	}
	mustFerry(t, kit, in.String(), "produce", "bulk", "t")
	out := mustFerry(t, kit, "", "consume", "bulk", "t", "--format", "raw")
	if out != in.String() {
		t.Errorf("consume printed %d bytes, want the %d produced, in order", len(out), in.Len())
	}
}

// TestConsumeGroupCommitsOnlyWhenAsked: --consumer-group starts where the group resumes
// and stores nothing; with --commit it stores the offset of what it printed.
func TestConsumeGroupCommitsOnlyWhenAsked(t *testing.T) {
	kit := iggykit.Start(t)
	kit.Topic("g", "t", 1)
	kit.Produce("g", "t", 0, "m0", "m1", "m2", "m3")
	if _, err := kit.Admin.CreateConsumerGroup(kit.Ctx(), iggy.Name("g"), iggy.Name("t"), "grp"); err != nil {
		t.Fatal(err)
	}
	if out := mustFerry(t, kit, "", "consume", "g", "t", "--consumer-group", "grp", "--format", "raw"); out != "m0\nm1\nm2\nm3\n" {
		t.Errorf("a group with nothing stored: %q", out)
	}
	if _, found := kit.Stored("grp", "g", "t", 0); found {
		t.Fatal("consume without --commit stored an offset")
	}
	if out := mustFerry(t, kit, "", "consume", "g", "t", "--consumer-group", "grp", "--commit", "--count", "2", "--format", "raw"); out != "m0\nm1\n" {
		t.Errorf("--commit --count 2: %q", out)
	}
	kit.WantStored("grp", "g", "t", 0, 1)
	if out := mustFerry(t, kit, "", "consume", "g", "t", "--consumer-group", "grp", "--format", "raw"); out != "m2\nm3\n" {
		t.Errorf("after the commit the group resumes at %q, want m2, m3", out)
	}
	kit.WantStored("grp", "g", "t", 0, 1)
	wantErr(t, kit, `consumer group nope on g/t: iggy: get consumer group stream "g" topic "t" group "nope": ConsumerGroupIdNotFound (5000); no such consumer group on the topic: a connector creates its group when it starts`,
		"consume", "g", "t", "--consumer-group", "nope")
}

// TestConsumeFollow: -f prints what arrives after it caught up, and Ctrl-C (the context)
// ends it with no error.
func TestConsumeFollow(t *testing.T) {
	kit := iggykit.Start(t)
	kit.Topic("f", "t", 2)
	kit.Produce("f", "t", 0, "before")
	ctx, cancel := context.WithCancel(kit.Ctx())
	var out, errOut lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- ferryCmdTo(ctx, kit, "", &out, &errOut, "consume", "f", "t", "-f", "--format", "raw", "--poll-interval", "10ms")
	}()
	testkit.WaitFor(t, "the message before", func() bool { return out.String() == "before\n" })
	kit.Produce("f", "t", 1, "after")
	testkit.WaitFor(t, "the message after", func() bool { return out.String() == "before\nafter\n" })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("consume -f after Ctrl-C: %v (stderr %s)", err, errOut.String())
	}
}
