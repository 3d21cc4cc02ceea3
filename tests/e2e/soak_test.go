package e2e

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
)

// soakPad is the digits of padding of a soak payload.
const soakPad = 170

// soakPayloadPadded is message o of partition p in the soaks of the PostgreSQL and S3 sinks:
// JSON whose fields name its own partition and offset, so a reader can tell a row or object
// that holds the wrong message, with pad digits of padding (soakPad: about 200 bytes).
func soakPayloadPadded(p uint32, o uint64, pad int) string {
	return fmt.Sprintf(`{"p":%d,"o":%d,"pad":"%0*d"}`, p, o, pad, 0)
}

// soakLoad is what a soak produces: perPartition soak payloads to each of partitions
// 0..parts-1 of s/t, chunk a send, round-robin.
type soakLoad struct {
	parts        uint32
	perPartition uint64
	chunk        uint64
	// pause paces the producer between rounds, so the stream lasts while the test kills:
	// a rate, not a wait for anything.
	pause time.Duration
	// from is the first offset sent to each partition (a multiple of chunk: the offsets
	// before it were sent already); pad the payloads' padding digits (0: soakPad).
	from uint64
	pad  int
}

func (l soakLoad) total() int64 { return int64(l.parts) * int64(l.perPartition) }

// produce sends the load through c; every send must land at the offset it was meant for.
func (l soakLoad) produce(c *iggy.Client) error {
	msgs := make([]iggy.Message, l.chunk)
	pad := cmp.Or(l.pad, soakPad)
	for base := l.from; base < l.perPartition; base += l.chunk {
		for p := range l.parts {
			for i := range msgs {
				msgs[i] = iggy.Message{Payload: []byte(soakPayloadPadded(p, base+uint64(i), pad))}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res, err := c.SendMessages(ctx, iggy.Name("s"), iggy.Name("t"), wire.ToPartition(p), msgs)
			cancel()
			if err != nil {
				return err
			}
			if res.BaseOffset != base {
				return fmt.Errorf("send to partition %d landed at %d, want %d", p, res.BaseOffset, base)
			}
		}
		time.Sleep(l.pause)
	}
	return nil
}

// background produces the load on its own goroutine; the returned func waits for it and
// fails the test on its error.
func (l soakLoad) background(t *testing.T, c *iggy.Client) (wait func()) {
	var wg sync.WaitGroup
	var err error
	wg.Go(func() { err = l.produce(c) })
	return func() {
		t.Helper()
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// killSoak runs ferry (args, in dir) while the load is produced and SIGKILLs it kills
// times, each once the run has written something and then at a random moment up to jitter
// later (seeded rng: the moment is the point, not a wait), starting a new run after each.
// written tells how many messages the sink's target holds (negative: unknown for now).
// restart restarts the target's service: after kill i where restarts[i], and once under a
// running process (the run started at the middle kill) where restarts[0].
type killSoak struct {
	load     soakLoad
	dir      string
	args     []string
	kills    int
	rng      *rand.Rand
	jitter   time.Duration
	written  func() int64
	restart  func(t *testing.T)
	restarts map[int]bool
	// ready, when set, is awaited after the random moment and before each kill (the sink
	// in the state the kill should land in, e.g. a group commit open); it is also satisfied
	// once everything is written. atKill, when set, is called just before each kill.
	ready  func() bool
	atKill func()
}

// soakRuns is what a kill soak leaves: every run in order (the last one still running once
// every message is written) and the run the service was restarted under, if any.
type soakRuns struct {
	all            []*proc
	last           *proc
	restartedUnder *proc
}

func (k killSoak) run(t *testing.T, c *iggy.Client) soakRuns {
	t.Helper()
	wait := k.load.background(t, c)
	total := k.load.total()
	var out soakRuns
	run := startFerry(t, "run 0", k.dir, nil, k.args...)
	for i := 1; i <= k.kills; i++ {
		before := max(k.written(), 0)
		testkit.WaitFor(t, fmt.Sprintf("run %d writing", i-1), func() bool {
			return run.exited() || k.written() > before || before == total
		})
		time.Sleep(time.Duration(k.rng.Int64N(int64(k.jitter))))
		if k.ready != nil {
			testkit.WaitFor(t, fmt.Sprintf("run %d ready to be killed", i-1), func() bool {
				return run.exited() || k.ready() || k.written() >= total
			})
		}
		if run.exited() {
			t.Fatalf("run %d exited by itself: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
		}
		if k.atKill != nil {
			k.atKill()
		}
		run.kill()
		if k.restarts[i] {
			k.restart(t)
		}
		t.Logf("kill %d: %d messages written", i, k.written())
		out.all = append(out.all, run)
		run = startFerry(t, fmt.Sprintf("run %d", i), k.dir, nil, k.args...)
		if i == (k.kills+1)/2 && k.restarts[0] {
			before := max(k.written(), 0)
			testkit.WaitFor(t, "the run writing", func() bool { return k.written() > before })
			k.restart(t)
			out.restartedUnder = run
		}
	}
	wait()
	testkit.WaitFor(t, "every message written", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return k.written() >= total
	})
	out.all = append(out.all, run)
	out.last = run
	return out
}

// groupTakeover runs two ferry processes, "a" and "b" (start starts one), in one consumer
// group while the load is produced; once both own partitions, the sink wrote more and it
// holds a position for every partition (positioned: so whichever partitions a owns, b
// finds where they stand), a is SIGKILLed, and b must write every message, taking a's
// partitions over from where the sink's target says they stand (a seek per partition,
// logged). b is stopped at the end.
func groupTakeover(t *testing.T, c *iggy.Client, load soakLoad, start func(name string) *proc, written func() int64, positioned func() bool) {
	t.Helper()
	wait := load.background(t, c)
	a, b := start("a"), start("b")
	owns := regexp.MustCompile(`assignment changed.* assigned="?\[\d`)
	testkit.WaitFor(t, "both members owning partitions", func() bool {
		return owns.MatchString(a.out.String()) && owns.MatchString(b.out.String())
	})
	before := max(written(), 0)
	testkit.WaitFor(t, "messages written after both joined, and a position for every partition", func() bool {
		return written() > before && positioned()
	})
	const seek = "partition starts where the sink says"
	seeksBefore := strings.Count(b.out.String(), seek)
	a.kill()
	t.Logf("a killed with %d messages written", written())
	wait()
	testkit.WaitFor(t, "every message written", func() bool {
		if b.exited() {
			t.Fatalf("b exited: %v", b.err)
		}
		return written() >= load.total()
	})
	b.stop(30 * time.Second)
	if strings.Count(b.out.String(), seek) <= seeksBefore {
		t.Fatalf("b took a's partitions over without reading where they stand from the sink:\n%s", tail(b.out.String(), 30))
	}
}

// poisonedTopic starts a ferry server under dir and fills its s/t (one partition) with 200
// messages {"o":N}, of which the one at offset 42 is not JSON ("not json at all"): the
// poison-message tests of the sinks. It returns the server's address.
func poisonedTopic(t *testing.T, dir string) string {
	t.Helper()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 1)
	msgs := make([]iggy.Message, 200)
	for i := range msgs {
		msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, `{"o":%d}`, i)}
	}
	msgs[42].Payload = []byte("not json at all")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.SendMessages(ctx, iggy.Name("s"), iggy.Name("t"), wire.ToPartition(0), msgs); err != nil {
		t.Fatal(err)
	}
	return addr
}

// topicMessages is the number of messages in the partitions of s/topic (0 while the topic
// cannot be read), what the source soaks wait on.
func topicMessages(c *iggy.Client, topic string) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	td, err := c.GetTopic(ctx, iggy.Name("s"), iggy.Name(topic))
	if err != nil {
		return 0
	}
	var n uint64
	for _, p := range td.Partitions {
		n += p.MessagesCount
	}
	return n
}
