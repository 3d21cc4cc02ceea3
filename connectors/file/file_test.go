package file

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// onDisk is the kit's Committer (the runtime's rules, every commit recorded) with this
// sink's promise checked at each commit: the committed offset's line is already in the
// file (read from disk).
type onDisk struct {
	*sdktest.Committer
	t    *testing.T
	path string
}

func newOnDisk(t *testing.T, path string) onDisk {
	return onDisk{Committer: sdktest.NewCommitter(), t: t, path: path}
}

func (c onDisk) Commit(p sdk.Partition, offset uint64) error {
	data, err := os.ReadFile(c.path)
	if err != nil {
		c.t.Errorf("read: %v", err)
	}
	needle := `"partition":` + itoa(uint64(p.PartitionID)) + `,"offset":` + itoa(offset) + `,`
	if !strings.Contains(string(data), needle) {
		c.t.Errorf("commit of p%d/%d before its line is in the file", p.PartitionID, offset)
	}
	return c.Committer.Commit(p, offset)
}

// commits renders the accepted commits as "p0@4", sorted (the partitions of one fsync
// are committed in no set order).
func (c onDisk) commits() []string { return sorted(c.inOrder()) }

// inOrder renders the accepted commits as "p0@4", in the order they were made.
func (c onDisk) inOrder() []string {
	var out []string
	for _, m := range c.Commits() {
		out = append(out, "p"+itoa(uint64(m.Partition.PartitionID))+"@"+itoa(m.Offset))
	}
	return out
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

var topic = sdk.TopicMetadata{Stream: "orders", Topic: "eu", StreamID: 1, TopicID: 2}

func part(id uint32) sdk.MessagesMetadata {
	return sdk.MessagesMetadata{Partition: sdk.Partition{StreamID: 1, TopicID: 2, PartitionID: id}, Schema: sdk.SchemaJSON}
}

func msgs(offsets ...uint64) []sdk.ConsumedMessage {
	out := make([]sdk.ConsumedMessage, len(offsets))
	for i, o := range offsets {
		out[i] = sdk.ConsumedMessage{Offset: o, ID: sdk.MessageIDFromUint64(o), Payload: []byte(`{"n":` + itoa(o) + `}`)}
	}
	return out
}

// open opens a sink with cfg, committing to c (nil: not sink_controlled).
func open(t *testing.T, cfg string, c sdk.Committer) *Sink {
	t.Helper()
	s := New()
	env := sdktest.SinkEnv(t, cfg, nil)
	env.Committer = c
	if err := s.Open(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	return s
}

// consume delivers a batch of partition id as the runtime does: recorded as delivered in
// c first (when there is one).
func consume(t *testing.T, s *Sink, c onDisk, id uint32, batch []sdk.ConsumedMessage) {
	t.Helper()
	if c.Committer != nil {
		c.Deliver(part(id).Partition, batch)
	}
	if err := s.Consume(context.Background(), topic, part(id), batch); err != nil {
		t.Fatal(err)
	}
}

func TestExactLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	s := open(t, `{"path":"`+path+`"}`, nil)
	ctx := context.Background()
	m := []sdk.ConsumedMessage{{
		ID: sdk.MessageIDFromUint64(0xabc), Offset: 7, Timestamp: 1700000000000001, OriginTimestamp: 1700000000000000,
		Headers: []sdk.Header{{Key: sdk.String("trace"), Value: sdk.String("a<b")}, {Key: sdk.String("n"), Value: sdk.Uint64(1)}},
		Payload: []byte("{ \"a\" : [1, 2.50, \"<x>\"] }"),
	}, {Offset: 8, Payload: []byte("not json")}}
	if err := s.Consume(ctx, topic, part(3), m); err != nil {
		t.Fatal(err)
	}
	text := part(3)
	text.Schema = sdk.SchemaText
	raw := part(4)
	raw.Schema = sdk.SchemaRaw
	if err := s.Consume(ctx, topic, text, []sdk.ConsumedMessage{{Offset: 9, Payload: []byte("héllo\n")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(ctx, topic, raw, []sdk.ConsumedMessage{{Offset: 0, Payload: []byte{0, 1, 2, 255}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"stream":"orders","topic":"eu","partition":3,"offset":7,"id":"00000000000000000000000000000abc","timestamp":1700000000000001,"origin_timestamp":1700000000000000,"headers":[{"key":"trace","kind":"string","value":"a<b"},{"key":"n","kind":"uint64","value":"AQAAAAAAAAA="}],"payload":{"a":[1,2.50,"<x>"]}}
{"stream":"orders","topic":"eu","partition":3,"offset":8,"id":"00000000000000000000000000000000","timestamp":0,"origin_timestamp":0,"headers":[],"payload":"bm90IGpzb24="}
{"stream":"orders","topic":"eu","partition":3,"offset":9,"id":"00000000000000000000000000000000","timestamp":0,"origin_timestamp":0,"headers":[],"payload":"héllo\n"}
{"stream":"orders","topic":"eu","partition":4,"offset":0,"id":"00000000000000000000000000000000","timestamp":0,"origin_timestamp":0,"headers":[],"payload":"AAEC/w=="}
`
	if string(got) != want {
		t.Fatalf("file content:\n%s\nwant:\n%s", got, want)
	}
	if err := s.Consume(ctx, topic, part(3), msgs(10)); err == nil {
		t.Fatal("Consume after Close succeeded")
	}
}

func TestSinkControlledCommitsOnlyAfterFsync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	c := newOnDisk(t, path)
	s := open(t, `{"path":"`+path+`","flush_interval":"1h"}`, c)
	for _, b := range []struct {
		p    uint32
		offs []uint64
	}{{0, []uint64{0, 1, 2}}, {1, []uint64{5}}, {0, []uint64{3, 4}}} {
		consume(t, s, c, b.p, msgs(b.offs...))
	}
	if got := c.commits(); len(got) != 0 {
		t.Fatalf("commits before any fsync: %v", got)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.commits(), ","); got != "p0@4,p1@5" {
		t.Fatalf("commits after fsync = %s", got)
	}
	if err := s.Sync(); err != nil { // nothing new: no commit
		t.Fatal(err)
	}
	consume(t, s, c, 1, msgs(6, 7))
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.commits(), ","); got != "p0@4,p1@5,p1@7" {
		t.Fatalf("commits after Close = %s", got)
	}
	if len(c.Refused()) != 0 {
		t.Fatalf("refused commits: %v", c.Refused())
	}
}

// A partition whose messages were purged is delivered again from 0 (connect/purge_test.go
// runs it end to end): the next flush commits the last batch written, 9, which the runtime
// takes, not the highest offset ever written, 99, a purged message's, which it refuses as
// never delivered since. A redelivery's commit is stale: no error, logged at most.
func TestSyncCommitsTheLastBatchAfterAPurge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	c := newOnDisk(t, path)
	s := open(t, `{"path":"`+path+`","flush_interval":"1h"}`, c)
	defer s.Close(context.Background())
	p := part(0).Partition
	c.Assign(p, 0)
	consume(t, s, c, 0, msgs(upTo(0, 99)...))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	consume(t, s, c, 0, msgs(upTo(95, 99)...)) // a redelivery
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	c.Assign(p, 0) // the runtime found the partition gone back to 0
	consume(t, s, c, 0, msgs(upTo(0, 9)...))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.inOrder(), ","); got != "p0@99,p0@9" {
		t.Fatalf("commits = %s, want p0@99,p0@9", got)
	}
	if bad := c.OutOfRange(); len(bad) != 0 {
		t.Fatalf("commits of offsets not delivered: %v", bad)
	}
}

// upTo is from..to, both included.
func upTo(from, to uint64) []uint64 {
	var out []uint64
	for o := from; o <= to; o++ {
		out = append(out, o)
	}
	return out
}

func TestPeriodicFsyncCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	c := newOnDisk(t, path)
	s := open(t, `{"path":"`+path+`","flush_interval":"5ms"}`, c)
	defer s.Close(context.Background())
	consume(t, s, c, 2, msgs(41, 42))
	c.WaitCommitted(t, part(2).Partition, 42)
	if got := c.commits(); len(got) != 1 || got[0] != "p2@42" {
		t.Fatalf("commits = %v", got)
	}
}

func TestFsyncEachBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	c := newOnDisk(t, path)
	s := open(t, `{"path":"`+path+`","flush_interval":"1h","fsync_each_batch":true}`, c)
	defer s.Close(context.Background())
	consume(t, s, c, 0, msgs(0, 1))
	if got := c.commits(); len(got) != 1 || got[0] != "p0@1" {
		t.Fatalf("commits = %v", got)
	}
}

// Every plugin_config problem is refused by `ferry check` (Spec.Validate) and by Open,
// with the key and what is wrong. A flush_interval of zero was refused by Open only.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ cfg, want string }{
		{`null`, "plugin_config.path: required field is missing"},
		{`{"path":""}`, "plugin_config.path: empty path"},
		{`{"path":"x","flush_interval":"soon"}`, `plugin_config.flush_interval: want a duration like "1s" or "250ms", got "soon"`},
		{`{"path":"x","flush_interval":"0"}`, `plugin_config.flush_interval: want a positive duration like "1s", got 0s`},
		{`{"path":"x","colour":1}`, "plugin_config.colour: unknown field (known: path, flush_interval, fsync_each_batch)"},
		{`{"path":"x","fsync_each_batch":"yes"}`, `plugin_config.fsync_each_batch: want a bool, got string "yes"`},
	} {
		if errs := Spec.Validate([]byte(tc.cfg)); len(errs) != 1 || errs[0].Error() != tc.want {
			t.Errorf("check %s: %v, want %s", tc.cfg, errs, tc.want)
		}
		err := New().Open(context.Background(), sdktest.SinkEnv(t, tc.cfg, nil))
		if err == nil || err.Error() != "file sink: "+tc.want || !errors.Is(err, sdk.ErrPermanent) {
			t.Errorf("Open(%s) = %v, want the permanent error file sink: %s", tc.cfg, err, tc.want)
		}
	}
}

// The sink states at least once, in each mode it runs in: the harness runs it against a
// real file through assignments, a rebalance and a crash (the instance dropped without
// Close) at every step, and the file must hold every message.
func TestAtLeastOnceCrashAtEveryStep(t *testing.T) {
	for _, tc := range []struct {
		name           string
		cfg            string
		sinkControlled bool
	}{
		{"sink_controlled/fsync_each_batch", `"fsync_each_batch":true,"flush_interval":"1h"`, true},
		{"sink_controlled/commit_at_close", `"flush_interval":"1h"`, true},
		{"after_consuming/fsync_each_batch", `"fsync_each_batch":true`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			sdktest.SinkHarness{
				New:            func() sdk.Sink { return New() },
				Config:         `{"path":"` + path + `",` + tc.cfg + `}`,
				SinkControlled: tc.sinkControlled,
				Guarantee:      sdktest.AtLeastOnce,
				Reset: func(context.Context) error {
					if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
						return err
					}
					return nil
				},
				Read: func(context.Context) ([]sdktest.Record, error) { return readRecords(path) },
			}.CrashAtEveryStep(t)
		})
	}
}

// readRecords reads the sink's file as the harness judges it.
func readRecords(path string) ([]sdktest.Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []sdktest.Record
	for i, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		out = append(out, sdktest.Record{Partition: r.Partition, Offset: r.Offset, Payload: r.Payload})
	}
	return out, nil
}

func sorted(s []string) []string { slices.Sort(s); return s }
