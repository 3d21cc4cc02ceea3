package partfiles_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"

	"example.com/ferry-custom/partfiles"
)

// The sink's promise, checked the way the runtime would run it: at least once, whatever
// step a crash (the instance dropped without Close) hits, through assignments, a
// rebalance and every batch, against real files read back after each run.
func TestAtLeastOnceCrashAtEveryStep(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	sdktest.SinkHarness{
		New:            partfiles.New,
		Config:         map[string]string{"dir": dir},
		SinkControlled: true,
		Guarantee:      sdktest.AtLeastOnce,
		Reset:          func(context.Context) error { return os.RemoveAll(dir) },
		Read:           func(context.Context) ([]sdktest.Record, error) { return readDir(dir) },
	}.CrashAtEveryStep(t)
}

// readDir reads every partition file of dir: "<offset> <quoted payload>" per line.
func readDir(dir string) ([]sdktest.Record, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	var out []sdktest.Record
	for _, path := range paths {
		var p uint32
		if _, err := fmt.Sscanf(filepath.Base(path), "stream.topic.%d.log", &p); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			off, quoted, _ := strings.Cut(sc.Text(), " ")
			o, err1 := strconv.ParseUint(off, 10, 64)
			payload, err2 := strconv.Unquote(quoted)
			if err := errors.Join(err1, err2); err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("%s: line %q: %w", path, sc.Text(), err)
			}
			out = append(out, sdktest.Record{Partition: p, Offset: o, Payload: []byte(payload)})
		}
		if err := errors.Join(sc.Err(), f.Close()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Each batch is committed once its file is fsynced, inside Consume; a partition taken
// away keeps its lines, and the batch whose commit the runtime refuses does not fail.
func TestCommitsEachBatch(t *testing.T) {
	dir := t.TempDir()
	c := sdktest.NewCommitter()
	s := partfiles.New()
	ctx := context.Background()
	if err := s.Open(ctx, sdktest.SinkEnv(t, map[string]string{"dir": dir}, c)); err != nil {
		t.Fatal(err)
	}
	p := sdktest.Part(2)
	if err := sdktest.Consume(ctx, s, c, sdktest.Topic, p, sdktest.Messages(2, 0, 3, nil)); err != nil {
		t.Fatal(err)
	}
	c.WaitCommitted(t, p, 2)
	c.Revoke(p)
	if err := sdktest.Consume(ctx, s, nil, sdktest.Topic, p, sdktest.Messages(2, 3, 2, nil)); err != nil {
		t.Fatalf("a batch of a partition taken away: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := readDir(dir)
	if err != nil || len(recs) != 5 || recs[4].Offset != 4 {
		t.Fatalf("records %v (%v), want offsets 0..4", recs, err)
	}
	if got := fmt.Sprint(len(c.Commits()), len(c.Refused()), len(c.OutOfRange())); got != "1 1 0" {
		t.Fatalf("commits, refused, out of range: %s", got)
	}
}

// A file left with an unfinished last line (a write a crash interrupted) loses that line,
// and only it, before the next batch is appended.
func TestUnfinishedLineCut(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stream.topic.0.log")
	if err := os.WriteFile(path, []byte("0 \"a\"\n1 \"b"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := sdktest.NewCommitter()
	s := partfiles.New()
	ctx := context.Background()
	if err := s.Open(ctx, sdktest.SinkEnv(t, map[string]string{"dir": dir}, c)); err != nil {
		t.Fatal(err)
	}
	payload := func(_ uint32, o uint64) []byte { return []byte(string(rune('a' + o))) }
	if err := sdktest.Consume(ctx, s, c, sdktest.Topic, sdktest.Part(0), sdktest.Messages(0, 1, 2, payload)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "0 \"a\"\n1 \"b\"\n2 \"c\"\n" {
		t.Fatalf("file %q (%v)", b, err)
	}
}

// Open refuses, permanently, a plugin_config the spec refuses and a run without a
// Committer.
func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		cfg       any
		committer bool
		want      string
	}{
		{nil, true, "partfiles: plugin_config.dir: required field is missing"},
		{`{"dir":" "}`, true, "partfiles: plugin_config.dir: must not be empty"},
		{`{"dir":"x","depth":3}`, true, "partfiles: plugin_config.depth: unknown field (known: dir)"},
		{map[string]string{"dir": t.TempDir()}, false, `partfiles: needs offset_commit = "sink_controlled"`},
	} {
		var c *sdktest.Committer
		if tc.committer {
			c = sdktest.NewCommitter()
		}
		err := partfiles.New().Open(context.Background(), sdktest.SinkEnv(t, tc.cfg, c))
		if err == nil || err.Error() != tc.want || !errors.Is(err, sdk.ErrPermanent) {
			t.Errorf("Open(%v) = %v, want the permanent error %s", tc.cfg, err, tc.want)
		}
	}
}
