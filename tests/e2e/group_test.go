package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
)

const (
	groupMessages       = 16000
	groupRate           = 2000 // 8 s of production: data keeps coming after B joined (≤ 10 s) and A is killed
	groupPartitions     = 4
	groupBatch          = 100
	groupMaxUncommitted = 1000
	// groupMode is sink_controlled: the file sink commits after each fsync (every 200 ms).
	// When a member joins, the partitions revoked from the other stay pending revocation on
	// the server until it has stored what it polled; the runtime keeps their commit entries
	// open for that drain, so they move within a flush interval, not the server's 30 s
	// rebalancing timeout.
	groupMode = "sink_controlled"
	// groupJoinBudget bounds how long a joining member may wait for data: the revoking
	// member's next assignment sync (the iggy client re-syncs every second,
	// WithAssignmentSync), the drain of the revoked partitions (about one flush interval),
	// then the joining member's next assignment sync (another second at most), far below
	// the 30 s the server would hold an undrained partition.
	groupJoinBudget = 5 * time.Second // measured 0.7–1.6 s; headroom for a loaded CI machine
)

var serverAddrRE = regexp.MustCompile(`iggy server listening" addr=(\S+)`)

// remoteConfig writes a config.toml pointing at a separate server, HTTP API off, and
// returns its path.
func remoteConfig(t testing.TB, dir, addr, connectorsDir string) string {
	t.Helper()
	return remoteConfigWith(t, dir, addr, connectorsDir, "[http]\nenabled = false\n")
}

// remoteConfigWith is remoteConfig with extra sections (the [http] ones) at the end.
func remoteConfigWith(t testing.TB, dir, addr, connectorsDir, extra string) string {
	t.Helper()
	path := filepath.Join(dir, "config.toml")
	writeFile(t, path, fmt.Sprintf(`[iggy]
address = %q
username = "iggy"
password = "iggy"

[state]
path = %q

[connectors]
config_type = "local"
config_dir = %q

`, addr, filepath.Join(dir, "state"), connectorsDir)+extra)
	return path
}

// TestGroupTakeover: two runtime processes (file sink, sink_controlled) in one consumer
// group against one `ferry server` (default 30 s rebalancing timeout). A runs alone, then
// B joins: B must write its first line within groupJoinBudget (A's revoked partitions are
// drained and handed over within a flush interval; B sees them at its next assignment sync,
// every 1 s; without the drain they are held until the server's 30 s timeout), and A logs no
// "commit refused". The two split the topic's four partitions; when A is killed with SIGKILL, the server drops it
// as soon as its TCP connection closes and B takes every partition over. At the end
// every (partition, offset) the producer wrote is in one of the two output files, the
// stored offsets reached the end of every partition, and duplicates are bounded by the
// killed member's uncommitted window.
func TestGroupTakeover(t *testing.T) {
	dir := t.TempDir()
	srv := startFerry(t, "server", dir, nil, "server", "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "srv"))
	var addr string
	testkit.WaitFor(t, "server address", func() bool {
		if srv.exited() {
			t.Fatalf("server exited: %v", srv.err)
		}
		if m := serverAddrRE.FindStringSubmatch(srv.out.String()); m != nil {
			addr = m[1]
			return true
		}
		return false
	})

	// The producer: a rate-limited random source; it creates the 4-partition topic.
	pdir := filepath.Join(dir, "producer")
	writeFile(t, filepath.Join(pdir, "connectors", "source.toml"), randomSource("g", "t", groupMessages, groupRate, groupBatch))
	pcfg := remoteConfig(t, pdir, addr, filepath.Join(pdir, "connectors"))
	producer := startFerry(t, "producer", pdir, nil, "run", "--config", pcfg, "--create-topics",
		"--partitions", fmt.Sprint(groupPartitions), "--progress", "0", "--exit-when-idle", "1s")
	testkit.WaitFor(t, "producer running", func() bool {
		if producer.exited() {
			t.Fatalf("producer exited: %v", producer.err)
		}
		return regexp.MustCompile(`source running`).MatchString(producer.out.String())
	})

	// Two members of one group (same sink key), each writing its own file.
	cdir := filepath.Join(dir, "consumers")
	outA, outB := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	writeFile(t, filepath.Join(cdir, "connectors", "sink.toml"), fileSink("g", "t", groupMode, outA, groupBatch, groupMaxUncommitted))
	ccfg := remoteConfig(t, cdir, addr, filepath.Join(cdir, "connectors"))
	memberA := startFerry(t, "member A", cdir, nil, "run", "--config", ccfg, "--progress", "0")
	testkit.WaitFor(t, "member A writing alone", func() bool {
		if memberA.exited() {
			t.Fatalf("member A exited: %v", memberA.err)
		}
		return countLines(outA) >= 200
	})
	joinedAt := time.Now()
	memberB := startFerry(t, "member B", cdir, []string{"IGGY_CONNECTORS_SINK_OUT_PLUGIN_CONFIG_PATH=" + outB},
		"run", "--config", ccfg, "--progress", "0")
	testkit.WaitFor(t, "member B receiving data after joining (A's revoked partitions drained, not held for the 30 s rebalancing timeout)", func() bool {
		if memberA.exited() || memberB.exited() {
			t.Fatalf("a member exited: A %v, B %v", memberA.err, memberB.err)
		}
		return countLines(outB) >= 1
	})
	if d := time.Since(joinedAt); d > groupJoinBudget {
		t.Fatalf("B wrote its first line %v after starting, want within %v", d, groupJoinBudget)
	}
	t.Logf("B wrote its first line %v after starting", time.Since(joinedAt).Round(time.Millisecond))

	testkit.WaitFor(t, "both members writing", func() bool {
		if memberA.exited() || memberB.exited() {
			t.Fatalf("a member exited: A %v, B %v", memberA.err, memberB.err)
		}
		return countLines(outA) >= 200 && countLines(outB) >= 200
	})
	if out := memberA.out.String(); strings.Contains(out, "commit refused") {
		t.Fatalf("member A's commits were refused around the rebalance:\n%s", tail(out, 20))
	}
	t.Logf("before SIGKILL: A wrote %d lines, B %d", countLines(outA), countLines(outB))
	memberA.kill()
	killedAt := len(readRecords(t, outB))

	producer.wait(15 * time.Second)
	var counts map[uint32]int64
	testkit.WaitFor(t, "member B to finish every partition", func() bool {
		if memberB.exited() {
			t.Fatalf("member B exited: %v", memberB.err)
		}
		offs, err := offsets(t, addr, "g", "t", sinkGroup)
		if err != nil || len(offs) != groupPartitions {
			return false
		}
		counts = map[uint32]int64{}
		var sum int64
		for p, o := range offs {
			if o.stored != o.current {
				return false
			}
			counts[p] = o.current + 1
			sum += o.current + 1
		}
		if sum != groupMessages {
			t.Fatalf("topic holds %d messages, want %d: %v", sum, groupMessages, offs)
		}
		return true
	})
	memberB.stop(15 * time.Second)

	a, b := readRecords(t, outA), readRecords(t, outB)
	seen := map[[2]uint64]int{}
	partsA, partsB := map[uint32]bool{}, map[uint32]bool{}
	for _, r := range a {
		seen[[2]uint64{uint64(r.Partition), r.Offset}]++
		partsA[r.Partition] = true
	}
	for i, r := range b {
		seen[[2]uint64{uint64(r.Partition), r.Offset}]++
		if i >= killedAt {
			partsB[r.Partition] = true
		}
	}
	dups := 0
	for p := uint32(0); p < groupPartitions; p++ {
		for o := int64(0); o < counts[p]; o++ {
			n := seen[[2]uint64{uint64(p), uint64(o)}]
			if n == 0 {
				t.Fatalf("partition %d offset %d is in neither output (A wrote %d lines, B %d)", p, o, len(a), len(b))
			}
			dups += n - 1
		}
	}
	if len(seen) != groupMessages {
		t.Fatalf("outputs hold %d distinct (partition, offset) pairs, want %d", len(seen), groupMessages)
	}
	if dups > groupPartitions*groupMaxUncommitted {
		t.Fatalf("%d duplicates, more than the killed member's uncommitted window (%d per partition)", dups, groupMaxUncommitted)
	}
	if len(partsB) != groupPartitions {
		t.Fatalf("after the kill B wrote partitions %v, want all %d (takeover)", partsB, groupPartitions)
	}
	t.Logf("A wrote %d lines on partitions %v before SIGKILL; B took over all partitions; %d duplicates, nothing lost", len(a), partsA, dups)
	srv.stop(10 * time.Second)
}
