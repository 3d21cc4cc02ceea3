package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/ferryio/ferry/iggy"
)

// scenario is one named check, run once per mode.
type scenario struct {
	name, about string
	run         func(ctx context.Context, r *Runner, mode string) Result
}

// onlyMode names the scenarios that apply to one mode only; the others run in every mode.
var onlyMode = map[string]string{"late-commit": SinkControlled, "commit-order": SinkControlled, "commit-after-stop": SinkControlled,
	// The S3 sink commits its own offsets: it refuses the other modes.
	"s3-soak": SinkControlled,
	// So does the Kafka sink: its offsets are in Kafka, written with the records.
	"kafka-soak": SinkControlled,
	// And the Iceberg sink: its offsets are in the table's snapshot summaries.
	"iceberg-soak": SinkControlled}

// atLeastOnceOnly names the scenarios about the runtime's offset stores, which
// after_polling does not make (the server stores with the poll).
var atLeastOnceOnly = map[string]bool{"storage-fault": true}

// ScenarioInfo names a scenario and says what it checks (for --help and the report).
type ScenarioInfo struct{ Name, About string }

// Scenarios lists every scenario in the order Run executes them.
func Scenarios() []ScenarioInfo {
	out := make([]ScenarioInfo, 0, len(scenarios))
	for _, s := range scenarios {
		out = append(out, ScenarioInfo{s.name, s.about})
	}
	return out
}

var scenarios = []scenario{
	{"clean", "checklist A: a clean run delivers every message exactly once and stores the last offset", runClean},
	{"failed-batch", "checklist B: consume fails (returns 1) on every retry; after a restart the failed batch is redelivered", runFailedBatch},
	{"sigkill-mid-batch", "checklist C: the runtime is SIGKILLed while a batch is inside consume", func(ctx context.Context, r *Runner, mode string) Result {
		return runCrash(ctx, r, mode, false)
	}},
	{"plugin-abort", "checklist C: the plugin abort()s inside consume, taking its process down", func(ctx context.Context, r *Runner, mode string) Result {
		return runCrash(ctx, r, mode, true)
	}},
	{"commit-codes", "checklist D: commit callback codes: accepted 0, stale -2, out of range -3, foreign partition -1, unknown id -1", runCommitCodes},
	{"late-commit", "checklist D: sink_controlled stores what the sink committed, not what consume returned: an uncommitted last batch is redelivered after SIGKILL", runLateCommit},
	{"commit-order", "checklist D: the sink commits each batch's last offset, then its first (lower) one: 0 then stale -2, and the stored offset never goes backwards", runCommitOrder},
	{"commit-after-stop", "checklist D: the sink keeps its commit callback and calls it after the runtime stopped it (on_failure = stop): -1", runCommitAfterStop},
	{"stopped-status", "status and metrics: on_failure = stop stops the sink; the HTTP API (Iggy's runtime API shape) reports it in error with last_error, the metrics count its error", runStoppedStatus},
	{"sigterm-in-flight", "checklist E: SIGTERM while a batch is inside consume: clean exit, nothing lost", runSigterm},
	{"poison", "checklist F: undecodable messages on a json stream never reach the sink; the rest is delivered and committed past", runPoison},
	{"rebalance", "checklist E, G: a second runtime process joins the group and the first leaves: no loss, nothing delivered twice, no partition delivered by the first after it moved", runRebalance},
	{"flaky-network", "chaos: a TCP fault proxy between runtime and server adds latency, stalls replies and resets connections", runFlaky},
	{"topic-recreated", "the sink's topic is deleted and created again under the same name once the sink caught up: every message of the new topic is delivered, from offset 0, none skipped", runTopicRecreated},
	{"server-restart", "chaos: the embedded server is closed and started again on the same address while the runtime runs", runServerRestart},
	{"storage-fault", "chaos: the server's disk is full, so every offset store is refused with 4006 for a while: the runtime keeps its partition and retries, lost 0, duplicates bounded by what was unstored when the fault began (not by its length); at-least-once modes", runStorageFault},
	{"server-sigkill", "chaos: the server, a child process, is SIGKILLed with batches in flight and restarted on the same address and data directory (a server that lost acknowledged messages fails it, named)", runServerSigkill},
	{"source-clean", "checklist F: the probe source's batches are stored once each, in order, ACKed only after Iggy stored them, and its state saved", runSourceClean},
	{"source-sigkill", "checklist F: the runtime is SIGKILLed 5 times (or --soak times) while the probe source produces; it resumes from the saved state", runSourceSigkill},
	{"source-poison", "checklist F: messages a source produced that are not JSON are skipped one by one (on_failure = skip), not NACKed with their batch", runSourcePoison},
	{"source-outage", "checklist F: Iggy goes away with a batch unsent and the runtime is stopped: that batch is not ACKed, nothing is lost", runSourceOutage},
	{"source-stopped-status", "checklist F, G: on_failure = stop and a batch with a message that is not JSON: the source is stopped, and the HTTP API reports it in error with last_error, the metrics count its error", runSourceStoppedStatus},
	{"source-late-result", "checklist F: the probe gives up on a batch whose send is held past its result timeout; the runtime's late ACK is refused (-1) and ignored, nothing is lost", runSourceLateResult},
	{"postgres-soak", "chaos: the PostgreSQL sink (--postgres) into a table of its own while the runtime is SIGKILLed --soak times, at held offset stores, blocked writes and random moments: exactly once", runPostgresSoak},
	{"postgres-cdc", "chaos: the PostgreSQL CDC source (builtin:postgres as a source, --postgres with wal_level = logical) on three tables while a writer commits transactions and the runtime is SIGKILLed --soak times: every committed change in the topic once, in commit order", runPostgresCDC},
	{"s3-soak", "chaos: the S3 sink (builtin:s3, --s3) into a bucket of its own while the runtime is SIGKILLed --soak times, at held offset stores and random moments: exactly once, judged from the objects", runS3Soak},
	{"iggy-replication", "chaos: the Iggy source (builtin:iggy) replicates a remote server (a child process, the server command) while a writer appends to it, the runtime is SIGKILLed --soak times and the remote server once: the local topic equals the remote one, message for message (ids, payloads, headers, order)", runIggyReplication},
	{"kafka-soak", "chaos: the Kafka sink (builtin:kafka, --kafka) into a topic of its own while the runtime is SIGKILLed --soak times, at held offset stores and random moments: exactly once, judged from the topic read read_committed", runKafkaSoak},
	{"iceberg-soak", "chaos: the Iceberg sink (builtin:iceberg, --iceberg) into a table of its own (a SQL catalog on the PostgreSQL given, a local warehouse) while the runtime is SIGKILLed --soak times, at held offset stores and random moments: exactly once, judged from the table's current snapshot", runIcebergSoak},
	{"soak", "chaos: SIGKILL the runtime --soak times at random (seeded) moments while data flows", runSoak},
}

func selectScenarios(names []string) ([]scenario, error) {
	if len(names) == 0 {
		return scenarios, nil
	}
	var out []scenario
	for _, n := range names {
		found := false
		for _, s := range scenarios {
			if s.name == n {
				out, found = append(out, s), true
			}
		}
		if !found {
			all := make([]string, len(scenarios))
			for i, s := range scenarios {
				all[i] = s.name
			}
			return nil, fmt.Errorf("conformance: unknown scenario %q (have %s)", n, strings.Join(all, ", "))
		}
	}
	return out, nil
}

func broken(expected string, err error) Result {
	return Result{Expected: expected, Observed: err.Error(), Verdict: Fail}
}

func unsupported(expected string, err error) Result {
	return Result{Expected: expected, Observed: err.Error(), Verdict: NotSupported}
}

// verdict turns a condition into a result carrying the tally.
func verdict(expected, observed string, ok bool, t tally) Result {
	v := Fail
	if ok {
		v = Pass
	}
	return Result{Expected: expected, Observed: observed, Verdict: v, Lost: t.lost, Duplicated: t.duplicated}
}

// clean reports whether nothing wrong was recorded besides loss and duplication.
func (t tally) clean() bool { return t.poisoned == 0 && t.corrupt == 0 && t.unknown == 0 }

func runClean(ctx context.Context, r *Runner, mode string) Result {
	const expected = "600 messages on 2 partitions: delivered 600, lost 0, duplicated 0; stored offsets at the end"
	f, p, err := r.begin(ctx, "clean", mode, setup{partitions: 2, conn: connector{batch: 50, maxRetries: -1}, after: 300})
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	return f.finish(ctx, expected, exactlyOnce, p)
}

func runFailedBatch(ctx context.Context, r *Runner, mode string) Result {
	expected := promise(mode, "the last failed batch is redelivered after the restart: resumes at or before its offset, lost 0",
		"the failed batch may be lost (at-most-once); duplicated 0")
	f, p, err := r.begin(ctx, "failed-batch", mode, setup{partitions: 1, before: 300, conn: connector{batch: 50, onFailure: "stop", maxRetries: 2,
		probe: map[string]string{"fail_batch": "2", "fail_times": "1000000"}}})
	if err != nil {
		return outcome(expected, err)
	}
	if err := f.wait(ctx, "a failed consume", func() bool { return f.count('F') > 0 }); err != nil {
		p.kill()
		return broken(expected, err)
	}
	// Let the runtime exhaust its retries and apply its failure policy; the verdict does
	// not depend on how long this takes, only on what the restart redelivers.
	time.Sleep(time.Second)
	_ = p.term(20 * time.Second)
	// A runtime that restarts the stopped sink in-process opens a new probe instance, whose
	// consume calls count from 1 again: its batch 2 (a later one) fails then. The batch the
	// runtime last failed on is the one that must come again.
	failed := -1
	fails := 0
	for _, e := range f.events() {
		if e.kind == 'F' {
			fails++
			failed = int(e.off)
		}
	}
	opens := f.count('O')
	p, err = f.start(ctx, map[string]string{"fail_batch": "", "fail_times": ""})
	if err != nil {
		return broken(expected, err)
	}
	defer p.kill()
	return f.finish(ctx, expected, func(t tally) (string, bool) {
		resumed := -1
		o := 0
		for _, e := range f.events() {
			if e.kind == 'O' {
				o++
			}
			if e.kind == 'E' && o > opens && resumed < 0 {
				resumed = int(e.off)
			}
		}
		obs := fmt.Sprintf("%d failed consumes, the last at offset %d; after the restart delivery resumed at %d; %s", fails, failed, resumed, t)
		if atLeastOnce(mode) {
			return obs, t.clean() && t.lost == 0 && resumed >= 0 && resumed <= failed
		}
		return obs, t.clean() && t.duplicated == 0
	}, p)
}

// runCrash kills the runtime while a batch is in consume: by SIGKILL, or (abort) by the
// probe calling abort() at message 250.
func runCrash(ctx context.Context, r *Runner, mode string, abort bool) Result {
	expected := promise(mode, "lost 0; duplicated ≤ 300 (the batch in consume, one queued, one not yet stored)",
		"duplicated 0 (the batches in flight may be lost)")
	pc := map[string]string{"sleep_ms": "300"}
	if abort {
		pc = map[string]string{"abort_at": "250", "sleep_ms": "50"}
	}
	f, p, err := r.begin(ctx, "crash", mode, setup{partitions: 1, before: 600, conn: connector{batch: 100, maxRetries: -1, probe: pc}})
	if err != nil {
		return outcome(expected, err)
	}
	how := "SIGKILL with a batch in consume"
	if abort {
		how = "the plugin aborted"
		if err := f.wait(ctx, "the plugin's abort to end the runtime", p.exited); err != nil {
			p.kill()
			return broken(expected, err)
		}
	} else {
		err := f.wait(ctx, "a batch in consume after 200 recorded messages", func() bool {
			ev := f.events()
			return f.count('M') >= 200 && len(ev) > 0 && ev[len(ev)-1].kind == 'E'
		})
		p.kill()
		if err != nil {
			return broken(expected, err)
		}
	}
	before := f.count('M')
	p, err = f.start(ctx, map[string]string{"sleep_ms": "", "abort_at": ""})
	if err != nil {
		return broken(expected, err)
	}
	defer p.kill()
	return f.finish(ctx, expected, func(t tally) (string, bool) {
		obs := fmt.Sprintf("%s after %d recorded; %s", how, before, t)
		if atLeastOnce(mode) {
			return obs, t.clean() && t.lost == 0 && t.duplicated <= 300
		}
		return obs, t.clean() && t.duplicated == 0
	}, p)
}

func runCommitCodes(ctx context.Context, r *Runner, mode string) Result {
	want := map[string]int{"ok": 0, "stale": -2, "range": -3, "foreign": -1, "unknown": -1}
	order := []string{"ok", "stale", "range", "foreign", "unknown"}
	expected := "callback installed; ok 0, stale -2, range -3, foreign -1, unknown -1; lost 0"
	if mode != SinkControlled {
		expected = "no commit callback installed (the runtime commits by its mode); lost 0"
	}
	f, p, err := r.begin(ctx, "commit-codes", mode, setup{partitions: 1, before: 100,
		conn: connector{batch: 50, maxRetries: -1, probe: map[string]string{"commit": `"codes"`}}})
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	return f.finish(ctx, expected, func(t tally) (string, bool) {
		got := map[string]int{}
		for _, e := range f.events() {
			if e.kind == 'C' {
				if _, seen := got[e.name]; !seen {
					got[e.name] = e.rc
				}
			}
		}
		installed := f.count('K') > 0
		ok := t.clean() && t.lost == 0
		var parts []string
		if mode == SinkControlled {
			ok = ok && installed
			for _, k := range order {
				rc, seen := got[k]
				if !seen {
					parts = append(parts, k+" never called")
					ok = false
					continue
				}
				if rc != want[k] {
					parts = append(parts, fmt.Sprintf("%s %d (want %d)", k, rc, want[k]))
					ok = false
					continue
				}
				parts = append(parts, fmt.Sprintf("%s %d", k, rc))
			}
		} else {
			ok = ok && !installed
		}
		obs := fmt.Sprintf("callback installed: %v; %s", installed, t)
		if len(parts) > 0 {
			obs = fmt.Sprintf("callback installed: %v; %s; %s", installed, strings.Join(parts, ", "), t)
		}
		return obs, ok
	}, p)
}

func runSigterm(ctx context.Context, r *Runner, mode string) Result {
	expected := promise(mode, "exit 0 within 20s; lost 0, duplicated 0", "exit 0 within 20s; duplicated 0")
	f, p, err := r.begin(ctx, "sigterm", mode, setup{partitions: 1, before: 500,
		conn: connector{batch: 100, maxRetries: -1, probe: map[string]string{"sleep_ms": "400"}}})
	if err != nil {
		return outcome(expected, err)
	}
	err = f.wait(ctx, "a batch in consume after 100 recorded messages", func() bool {
		ev := f.events()
		return f.count('M') >= 100 && len(ev) > 0 && ev[len(ev)-1].kind == 'E'
	})
	if err != nil {
		p.kill()
		return broken(expected, err)
	}
	exit := "exit 0"
	termErr := p.term(20 * time.Second)
	if termErr != nil {
		exit = termErr.Error()
	}
	p, err = f.start(ctx, map[string]string{"sleep_ms": ""})
	if err != nil {
		return broken(expected, err)
	}
	defer p.kill()
	return f.finish(ctx, expected, func(t tally) (string, bool) {
		return exit + "; " + t.String(), termErr == nil && t.clean() && t.duplicated == 0 && noLoss(mode, t)
	}, p)
}

func runPoison(ctx context.Context, r *Runner, mode string) Result {
	const expected = "4 poison messages not delivered; the other 196 delivered once; stored offset at the end"
	f, p, err := r.begin(ctx, "poison", mode, setup{partitions: 1, before: 200,
		conn: connector{batch: 50, schema: "json", onFailure: "skip", maxRetries: -1},
		payload: func(_ uint32, i int) ([]byte, bool) {
			if i%50 == 7 {
				return []byte("not json {"), true
			}
			return nil, false
		}})
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	return f.finish(ctx, expected, exactlyOnce, p)
}

func runRebalance(ctx context.Context, r *Runner, mode string) Result {
	expected := promise(mode, "1200 messages on 4 partitions over two processes: every partition moves to the second, the first delivers none after its move; lost 0, duplicated 0",
		"1200 messages on 4 partitions over two processes: every partition moves to the second; duplicated 0 (a revoked or stopped member's polled batches may be lost, or delivered after the move)")
	f, a, err := r.begin(ctx, "rebalance", mode, setup{partitions: 4, conn: connector{batch: 20, maxRetries: -1}})
	if err != nil {
		return outcome(expected, err)
	}
	defer a.kill()
	step := func() error {
		if err := f.produce(ctx, 100, nil); err != nil {
			return err
		}
		if err := f.waitDone(ctx); err != nil {
			return err
		}
		if !atLeastOnce(mode) {
			f.quiesce(ctx)
		}
		return nil
	}
	if err := step(); err != nil {
		return broken(expected, err)
	}
	b, err := f.start(ctx, nil)
	if err != nil {
		return broken(expected, err)
	}
	defer b.kill()
	// Produce again only once the server shares the partitions out between the two
	// members: then the moved partitions' next messages go to the second process while the
	// first still runs, and a hand-over really happens under load.
	if err := f.wait(ctx, "the group to share the partitions between two members", func() bool { return f.shared(ctx, 2) }); err != nil {
		return broken(expected, err)
	}
	if err := step(); err != nil {
		return broken(expected, err)
	}
	if err := a.term(20 * time.Second); err != nil {
		return broken(expected, fmt.Errorf("first process: %w", err))
	}
	if err := step(); err != nil {
		return broken(expected, err)
	}
	if err := b.term(20 * time.Second); err != nil {
		return broken(expected, fmt.Errorf("second process: %w", err))
	}
	t := f.tally()
	h := f.handovers()
	obs := fmt.Sprintf("%d partitions moved to the other process; %d of them delivered by a process they had moved away from (%d messages); %s", h.moved, h.revokedParts, h.revoked, t)
	ok := h.moved == int(f.partitions) && t.duplicated == 0 && t.clean()
	if atLeastOnce(mode) {
		ok = ok && h.revoked == 0 && t.lost == 0
	}
	return verdict(expected, obs, ok, t)
}

// shared reports whether the server shows the group with n members that hold every
// partition between them, as evenly as can be (counts differing by at most one).
func (f *fixture) shared(ctx context.Context, n int) bool {
	g, err := f.r.admin.GetConsumerGroup(ctx, iggy.Name(f.stream), iggy.Name(f.topic), iggy.Name(f.group()))
	if err != nil || len(g.Members) != n {
		return false
	}
	total, least, most := 0, int(f.partitions), 0
	for _, m := range g.Members {
		total += len(m.Partitions)
		least, most = min(least, len(m.Partitions)), max(most, len(m.Partitions))
	}
	return total == int(f.partitions) && most-least <= 1
}

// handoverCount is what the record says about partitions moving between processes.
type handoverCount struct {
	moved   int // partitions whose messages were recorded by more than one process
	revoked int // messages recorded by a process after its partition moved to another
	// revokedParts is the number of partitions with such messages.
	revokedParts int
}

// handovers walks the record in file order: the probe appends each batch with one write
// before consume returns, so the order is the order of deliveries, and each message names
// the process that got it. In runRebalance a partition only ever moves from the first
// process to the second (it joins, then the first leaves), so a process's first message of
// a partition makes it the partition's owner, and the rule is: once a partition's
// messages came from a new process, the process it moved from delivers none of it again.
// That is Iggy's cooperative rebalance: it keeps a revoked partition "pending revocation"
// with its old member until the group's stored offset covers every offset served to that
// member (or a timeout), and only then serves it to the new one, and the old member must
// stop delivering it. Under after_consuming and sink_controlled the offset is stored only
// after the delivery, so each delivery by the old member comes before the new member's
// first; one after it delivers a revoked partition. (Under after_polling the offset is
// stored at poll, so the hand-over can complete while a batch the old member polled is
// still on its way to the sink: the scenario reports such late deliveries but does not
// hold them against that mode.)
func (f *fixture) handovers() handoverCount {
	var h handoverCount
	owner := map[uint32]int{}         // partition → the last process to deliver it first
	seen := map[uint32]map[int]bool{} // partition → the processes that delivered it
	bad := map[uint32]bool{}          // partitions delivered after they moved away
	for _, e := range f.events() {
		if e.kind != 'M' {
			continue
		}
		switch {
		case seen[e.p] == nil:
			seen[e.p] = map[int]bool{e.pid: true}
			owner[e.p] = e.pid
		case !seen[e.p][e.pid]:
			if len(seen[e.p]) == 1 {
				h.moved++
			}
			seen[e.p][e.pid] = true
			owner[e.p] = e.pid
		case owner[e.p] != e.pid:
			h.revoked++
			bad[e.p] = true
		}
	}
	h.revokedParts = len(bad)
	return h
}

func runFlaky(ctx context.Context, r *Runner, mode string) Result {
	expected := promise(mode, "through dropped connections, resets, stalled replies and latency: lost 0; stored offsets at the end",
		"through dropped connections, resets, stalled replies and latency: stored offsets at the end (losses allowed)")
	px, err := StartProxy(r.addr, ProxyFaults{
		Latency: time.Millisecond, ResetEvery: 300 * time.Millisecond, StallEvery: 200 * time.Millisecond,
		Stall: 100 * time.Millisecond, Seed: r.cfg.Seed,
	})
	if err != nil {
		return broken(expected, err)
	}
	defer px.Close()
	f, p, err := r.begin(ctx, "flaky", mode, setup{partitions: 2, conn: connector{batch: 50, maxRetries: -1}, addr: px.Addr()})
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	// Each step injects one fault for sure while data is produced; the periodic seeded
	// faults come on top.
	faults := []func(){func() {}, px.DropAll, px.ResetAll, func() { px.StallAll(time.Second) }}
	for _, fault := range faults {
		fault()
		if err := f.produce(ctx, 150, nil); err != nil {
			return broken(expected, err)
		}
		if err := f.waitDone(ctx); err != nil {
			return broken(expected, err)
		}
	}
	st := px.Stats()
	t := f.tally()
	obs := fmt.Sprintf("%d connections: %d dropped, %d reset, %d stalled; %s", st.Connections, st.Drops, st.Resets, st.Stalls, t)
	return verdict(expected, obs, t.clean() && st.Resets > 0 && st.Drops > 0 && noLoss(mode, t), t)
}

func runSoak(ctx context.Context, r *Runner, mode string) Result {
	kills := r.cfg.Soak
	expected := promise(mode, fmt.Sprintf("%d SIGKILLs while data flows: lost 0", kills),
		fmt.Sprintf("%d SIGKILLs while data flows: duplicated 0 (losses allowed)", kills))
	rng := rand.New(rand.NewSource(r.cfg.Seed))
	f, p, err := r.begin(ctx, "soak", mode, setup{partitions: 2, conn: connector{batch: 20, maxRetries: -1, probe: map[string]string{"sleep_ms": "5"}}})
	if err != nil {
		return outcome(expected, err)
	}
	for k := 0; k < kills; k++ {
		// Data flows in four steps per interval; the kill lands at a random moment of it.
		interval := 100*time.Millisecond + time.Duration(rng.Int63n(int64(300*time.Millisecond)))
		for s := 0; s < 4; s++ {
			if err := f.produce(ctx, 10+rng.Intn(20), nil); err != nil {
				p.kill()
				return broken(expected, err)
			}
			time.Sleep(interval / 4)
		}
		p.kill()
		if p, err = f.start(ctx, nil); err != nil {
			return broken(expected, fmt.Errorf("restart after kill %d: %w", k+1, err))
		}
	}
	defer p.kill()
	if err := f.produce(ctx, 50, nil); err != nil {
		return broken(expected, err)
	}
	if err := f.settle(ctx, p); err != nil {
		return broken(expected, err)
	}
	t := f.tally()
	ok := t.clean() && noLoss(mode, t)
	if !atLeastOnce(mode) {
		ok = ok && t.duplicated == 0
	}
	res := verdict(expected, fmt.Sprintf("%d kills; %s", kills, t), ok, t)
	res.Kills = kills
	return res
}

func runServerRestart(ctx context.Context, r *Runner, mode string) Result {
	expected := promise(mode, "the runtime reconnects after the server restarts: lost 0, duplicated 0",
		"the runtime reconnects after the server restarts: duplicated 0 (losses allowed)")
	if r.server == nil {
		return unsupported(expected, errors.New("needs the embedded server (not --server)"))
	}
	f, p, err := r.begin(ctx, "server-restart", mode, setup{partitions: 2, conn: connector{batch: 50, maxRetries: -1}, after: 200})
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	if err := f.waitDone(ctx); err != nil {
		return broken(expected, err)
	}
	if err := r.restartServer(ctx); err != nil {
		return broken(expected, err)
	}
	if err := f.produce(ctx, 200, nil); err != nil {
		return broken(expected, err)
	}
	return f.finish(ctx, expected, func(t tally) (string, bool) {
		return "server restarted once; " + t.String(), t.clean() && t.duplicated == 0 && noLoss(mode, t)
	}, p)
}

func runLateCommit(ctx context.Context, r *Runner, mode string) Result {
	const expected = "the sink commits each batch when the next one arrives; after SIGKILL the uncommitted last batch (100 messages) is redelivered: lost 0, duplicated 100"
	f, p, err := r.begin(ctx, "late-commit", mode, setup{partitions: 1, before: 300,
		conn: connector{batch: 100, maxRetries: -1, probe: map[string]string{"commit": `"late"`}}})
	if err != nil {
		return outcome(expected, err)
	}
	var stored int64
	err = f.wait(ctx, "300 recorded messages and the second batch's commit stored", func() bool {
		s, err := f.stored(ctx)
		stored = s[0]
		return err == nil && f.count('M') == 300 && stored >= 199
	})
	p.kill()
	if err != nil {
		return broken(expected, err)
	}
	p, err = f.start(ctx, map[string]string{"commit": `"immediate"`})
	if err != nil {
		return broken(expected, err)
	}
	return f.finish(ctx, expected, func(t tally) (string, bool) {
		obs := fmt.Sprintf("stored offset %d at the kill; %s", stored, t)
		return obs, stored == 199 && t.lost == 0 && t.duplicated == 100 && t.clean()
	}, p)
}

func runCommitOrder(ctx context.Context, r *Runner, mode string) Result {
	const expected = "every batch: its last offset 0, then its first (lower) offset stale -2; the stored offset never goes backwards and ends at the last message; lost 0, duplicated 0"
	f, p, err := r.begin(ctx, "commit-order", mode, setup{partitions: 2, before: 200,
		conn: connector{batch: 50, maxRetries: -1, probe: map[string]string{"commit": `"order"`}}})
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	// Sample the stored offsets until they reach the end: any sample lower than the one
	// before is the lower commit moving the offset back.
	prev := map[uint32]int64{}
	backwards := 0
	err = f.wait(ctx, "the stored offsets to reach the end", func() bool {
		s, err := f.stored(ctx)
		if err != nil {
			return false
		}
		done := true
		for q := uint32(0); q < f.partitions; q++ {
			if old, seen := prev[q]; seen && s[q] < old {
				backwards++
			}
			prev[q] = s[q]
			done = done && s[q] == int64(f.next[q])-1
		}
		return done
	})
	if err != nil {
		return broken(expected, fmt.Errorf("%w (stored %v)", err, prev))
	}
	return f.finish(ctx, expected, func(t tally) (string, bool) {
		codes := map[string]map[int]int{"high": {}, "low": {}}
		for _, e := range f.events() {
			if e.kind == 'C' && codes[e.name] != nil {
				codes[e.name][e.rc]++
			}
		}
		high, low := codes["high"], codes["low"]
		obs := fmt.Sprintf("higher commit codes %v, lower commit codes %v (code: count); stored offset went back %d times; %s", high, low, backwards, t)
		return obs, t.clean() && t.lost == 0 && t.duplicated == 0 && backwards == 0 &&
			len(high) == 1 && high[0] > 0 && len(low) == 1 && low[-2] == high[0]
	}, p)
}

func runCommitAfterStop(ctx context.Context, r *Runner, mode string) Result {
	const expected = "consume fails, on_failure = stop stops the sink (close); the commit callback kept and called after that returns -1"
	f, p, err := r.begin(ctx, "commit-after-stop", mode, setup{partitions: 1, before: 100, conn: connector{batch: 50, onFailure: "stop", maxRetries: 0,
		probe: map[string]string{"commit": `"afterstop"`, "fail_batch": "2", "fail_times": "1000000"}}})
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	// The runtime stays up (a stopped sink is not the end of the process), so the probe's
	// thread outlives the close it was started by.
	rc, closed, called := 0, false, false
	err = f.wait(ctx, "the probe's commit after the sink was stopped", func() bool {
		for _, e := range f.events() {
			closed = closed || e.kind == 'X'
			if e.kind == 'C' && e.name == "afterstop" {
				rc, called = e.rc, true
				return true
			}
		}
		return p.exited()
	})
	if err == nil && !called {
		err = errors.New("the runtime exited before the probe's commit after the stop")
	}
	if err != nil {
		return broken(expected, fmt.Errorf("%w (sink closed: %v)", err, closed))
	}
	_ = p.term(20 * time.Second)
	t := f.tally()
	obs := fmt.Sprintf("failed %d times, closed; commit after the stop returned %d", f.count('F'), rc)
	return verdict(expected, obs, closed && f.count('F') > 0 && rc == -1 && t.clean(), t)
}
