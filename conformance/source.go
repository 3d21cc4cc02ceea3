package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

// The source scenarios run the probe source (probe/c/source.c) in the runtime under test and
// judge from its record file and from what the topic holds. Sources have no commit mode:
// they run once, reported with the mode "source".

// SourceMode is the mode column of the source scenarios' results.
const SourceMode = "source"

// sourceScenarios run once, in SourceMode, whatever modes were asked for.
var sourceScenarios = map[string]bool{"source-clean": true, "source-sigkill": true, "source-poison": true, "source-outage": true, "source-late-result": true, "source-stopped-status": true, "postgres-cdc": true, "iggy-replication": true}

// sourceConnector is what a source scenario's connector file says.
type sourceConnector struct {
	total, batch, poisonEvery, intervalMS int
	resultTimeoutMS                       int    // 0 = the probe's default (30 s, the SDK's)
	resultTimeoutOnce                     bool   // resultTimeoutMS until its first timeout, then 30 s
	onFailure                             string // "" = the runtime's default
}

// sourceFixture is one source scenario run: its own stream, connector key, record file and a
// state directory kept across the runtime's restarts (the source's cursor lives there).
type sourceFixture struct {
	r         *Runner
	name, dir string
	stream    string
	topic     string
	key       string
	record    string
	state     string
	addr      string
	conn      sourceConnector
	instances int
	http      string // "" = [http] off; else the runtime's HTTP API address, metrics on
}

func (r *Runner) newSourceFixture(ctx context.Context, scenario string, c sourceConnector) (*sourceFixture, error) {
	r.seq++
	name := fmt.Sprintf("%s-%d", scenario, r.seq)
	f := &sourceFixture{r: r, name: name, dir: filepath.Join(r.dir, name), stream: "conformance-" + name, topic: "t",
		key: fmt.Sprintf("source%d", r.seq), addr: r.addr, conn: c}
	f.record = filepath.Join(f.dir, "record.txt")
	f.state = filepath.Join(f.dir, "state")
	if err := os.MkdirAll(f.state, 0o755); err != nil {
		return nil, err
	}
	if err := r.admin.EnsureTopic(ctx, f.stream, f.topic, 1); err != nil {
		return nil, fmt.Errorf("create topic: %w", err)
	}
	return f, nil
}

// writeConfig writes one runtime instance's config.toml (sharing the fixture's state
// directory) and the probe source's connector file.
func (f *sourceFixture) writeConfig() (string, error) {
	f.instances++
	dir := filepath.Join(f.dir, fmt.Sprintf("rt%d", f.instances))
	cdir := filepath.Join(dir, "connectors")
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return "", err
	}
	path, err := f.r.writeRuntimeConfig(dir, f.state, cdir, f.addr, f.http)
	if err != nil {
		return "", err
	}
	c := f.conn
	var b strings.Builder
	fmt.Fprintf(&b, "type = \"source\"\nkey = %q\nenabled = true\nversion = 0\nname = \"conformance probe source\"\npath = %q\n", f.key, f.r.sourceProbe)
	if c.onFailure != "" {
		fmt.Fprintf(&b, "on_failure = %q\n", c.onFailure)
	}
	fmt.Fprintf(&b, "\n[[streams]]\nstream = %q\ntopic = %q\nschema = \"json\"\nbatch_length = 1000\nlinger_time = \"5ms\"\n", f.stream, f.topic)
	fmt.Fprintf(&b, "\n[plugin_config]\nbatch = %d\ninterval_ms = %d\npoison_every = %d\nrecord = %q\ntotal = %d\n",
		c.batch, c.intervalMS, c.poisonEvery, f.record, c.total)
	if c.resultTimeoutMS > 0 {
		fmt.Fprintf(&b, "result_timeout_ms = %d\n", c.resultTimeoutMS)
	}
	if c.resultTimeoutOnce {
		b.WriteString("result_timeout_once = 1\n")
	}
	if err := os.WriteFile(filepath.Join(cdir, "source.toml"), []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// start starts one runtime instance and returns once it opened the probe source (or an
// error with its last log lines: the caller reports "not supported").
func (f *sourceFixture) start(ctx context.Context) (*proc, error) {
	opened := f.count('O')
	path, err := f.writeConfig()
	if err != nil {
		return nil, err
	}
	p, err := f.r.startRuntime(path, filepath.Join(filepath.Dir(path), "runtime.log"))
	if err != nil {
		return nil, err
	}
	err = f.wait(ctx, "the runtime to open the probe source", func() bool { return f.count('O') > opened || p.exited() })
	if err == nil && f.count('O') == opened {
		err = errors.New("runtime exited before opening the probe source")
		if p.err != nil {
			err = fmt.Errorf("runtime exited (%w) before opening the probe source", p.err)
		}
	}
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("%w; runtime log: %s", err, oneLine(p.tail(5)))
	}
	return p, nil
}

func (f *sourceFixture) wait(ctx context.Context, what string, cond func() bool) error {
	return f.r.wait(ctx, what, cond)
}

// sourceEvent is one line of the probe source's record file.
type sourceEvent struct {
	kind                    byte
	batch, first, count, at uint64 // at: the open's next, or the ACK's time in µs
	rc                      int    // B: the send callback's code; R: batch_result's
	result                  int    // R: the result the runtime gave
	why                     string // N
}

// events parses the record file; lines cut by a kill are ignored.
func (f *sourceFixture) events() []sourceEvent {
	fh, err := os.Open(f.record)
	if err != nil {
		return nil
	}
	defer func() { _ = fh.Close() }()
	var out []sourceEvent
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 || len(fs[0]) != 1 {
			continue
		}
		num := func(i int) uint64 {
			v, _ := strconv.ParseUint(fs[i], 10, 64)
			return v
		}
		e := sourceEvent{kind: fs[0][0]}
		switch {
		case (e.kind == 'O' || e.kind == 'D') && len(fs) == 3:
			e.at = num(2)
		case e.kind == 'S' && len(fs) == 5:
			e.batch, e.first, e.count = num(2), num(3), num(4)
		case e.kind == 'B' && len(fs) == 4:
			e.batch = num(2)
			e.rc, _ = strconv.Atoi(fs[3])
		case e.kind == 'A' && len(fs) == 6:
			e.batch, e.first, e.count, e.at = num(2), num(3), num(4), num(5)
		case e.kind == 'N' && len(fs) == 6:
			e.batch, e.first, e.count, e.why = num(2), num(3), num(4), fs[5]
		case e.kind == 'R' && len(fs) == 5:
			e.batch = num(2)
			e.result, _ = strconv.Atoi(fs[3])
			e.rc, _ = strconv.Atoi(fs[4])
		case e.kind == 'Z' || e.kind == 'X':
		default:
			continue
		}
		out = append(out, e)
	}
	return out
}

func (f *sourceFixture) count(kind byte) int {
	n := 0
	for _, e := range f.events() {
		if e.kind == kind {
			n++
		}
	}
	return n
}

// waitProduced waits until the probe instance open now produced everything (D), gave up
// after 5 NACKs (Z) or was closed by the runtime (X: a runtime that stops the source).
func (f *sourceFixture) waitProduced(ctx context.Context) error {
	opens := f.count('O')
	return f.wait(ctx, "the probe source to produce every message (or give up after 5 NACKs, or be closed)", func() bool {
		o := 0
		for _, e := range f.events() {
			switch {
			case e.kind == 'O':
				o++
			case (e.kind == 'D' || e.kind == 'Z' || e.kind == 'X') && o == opens:
				return true
			}
		}
		return false
	})
}

// poison reports whether the probe gives sequence number seq a payload that is not JSON.
func (f *sourceFixture) poison(seq uint64) bool {
	k := uint64(f.conn.poisonEvery)
	return k > 0 && seq%k == k-1
}

// topicMessage is one message read back from the source's topic.
type topicMessage struct {
	offset, seq, timestamp uint64
	poison                 bool
}

// read polls the whole topic.
func (f *sourceFixture) read(ctx context.Context) ([]topicMessage, error) {
	var out []topicMessage
	zero := uint32(0)
	next := uint64(0)
	for {
		res, err := f.r.admin.PollMessages(ctx, iggy.PollRequest{
			Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)},
			Stream:   iggy.Name(f.stream), Topic: iggy.Name(f.topic), Partition: &zero,
			Strategy: wire.PollOffset(next), Count: 1000,
		})
		if err != nil {
			return nil, fmt.Errorf("read the source's topic: %w", err)
		}
		if len(res.Messages) == 0 {
			return out, nil
		}
		for _, m := range res.Messages {
			tm := topicMessage{offset: m.Offset, timestamp: m.Timestamp}
			var v struct {
				Seq *uint64 `json:"seq"`
			}
			if s, ok := strings.CutPrefix(string(m.Payload), "not json "); ok {
				tm.poison = true
				tm.seq, _ = strconv.ParseUint(s, 10, 64)
			} else if err := json.Unmarshal(m.Payload, &v); err == nil && v.Seq != nil {
				tm.seq = *v.Seq
			} else {
				tm.seq = ^uint64(0) // neither: counted as unknown
			}
			out = append(out, tm)
			next = m.Offset + 1
		}
	}
}

// sourceTally is what the topic and the record say about a source's delivery.
type sourceTally struct {
	stored     int // distinct sequence numbers in the topic
	lost       int // produced by the probe (not poison), not in the topic
	duplicated int // copies beyond the first
	poisoned   int // poison payloads in the topic
	unknown    int // payloads the probe never produced
	outOfOrder int // messages whose sequence number is lower than the one stored before them
	acks       int // A lines
	nacks      map[string]int
	refused    int // batch results the probe refused (-1)
	early      int // ACKed batches with a message the server stored after the ACK
	stopped    bool
	closed     int // instances the runtime closed before they produced everything
}

func (t sourceTally) String() string {
	s := fmt.Sprintf("topic: stored %d, lost %d, duplicated %d", t.stored, t.lost, t.duplicated)
	if t.poisoned > 0 {
		s += fmt.Sprintf(", poison stored %d", t.poisoned)
	}
	if t.unknown > 0 {
		s += fmt.Sprintf(", unknown %d", t.unknown)
	}
	if t.outOfOrder > 0 {
		s += fmt.Sprintf(", out of order %d", t.outOfOrder)
	}
	nacks := 0
	var why []string
	for _, k := range []string{"runtime", "callback", "timeout", "close"} {
		if n := t.nacks[k]; n > 0 {
			nacks += n
			why = append(why, fmt.Sprintf("%s %d", k, n))
		}
	}
	s += fmt.Sprintf("; probe: %d ACKs, %d NACKs", t.acks, nacks)
	if len(why) > 0 {
		s += " (" + strings.Join(why, ", ") + ")"
	}
	s += fmt.Sprintf(", %d results refused, %d batches ACKed before Iggy stored them", t.refused, t.early)
	if t.stopped {
		s += ", the source stopped after 5 NACKs"
	}
	if t.closed > 0 {
		s += fmt.Sprintf(", closed %d times before it produced everything", t.closed)
	}
	return s
}

// nackCount is the number of NACKs of every kind.
func (t sourceTally) nackCount() int {
	n := 0
	for _, v := range t.nacks {
		n += v
	}
	return n
}

// tally reads the topic and the record. The ACK-before-store check compares the probe's
// clock with the server's append timestamps, so it runs only when both are on this machine.
func (f *sourceFixture) tally(ctx context.Context) (sourceTally, error) {
	msgs, err := f.read(ctx)
	if err != nil {
		return sourceTally{}, err
	}
	t := sourceTally{nacks: map[string]int{}}
	total := uint64(f.conn.total)
	poison := f.poison
	first := map[uint64]uint64{} // seq → earliest append timestamp
	var prev uint64
	for i, m := range msgs {
		switch {
		case m.seq >= total:
			t.unknown++
			continue
		case m.poison:
			t.poisoned++
			continue
		}
		if i > 0 && m.seq < prev {
			t.outOfOrder++
		}
		prev = m.seq
		if ts, seen := first[m.seq]; seen {
			t.duplicated++
			if m.timestamp < ts {
				first[m.seq] = m.timestamp
			}
			continue
		}
		first[m.seq] = m.timestamp
	}
	t.stored = len(first)
	for s := uint64(0); s < total; s++ {
		if _, ok := first[s]; !ok && !poison(s) {
			t.lost++
		}
	}
	sameClock := f.r.server != nil || isLoopback(f.r.addr)
	done := false
	for _, e := range f.events() {
		switch e.kind {
		case 'O':
			done = false
		case 'D':
			done = true
		case 'X':
			if !done {
				t.closed++
			}
		case 'A':
			t.acks++
			if !sameClock {
				continue
			}
			for s := e.first; s < e.first+e.count; s++ {
				if ts, ok := first[s]; ok && ts > e.at {
					t.early++
					break
				}
			}
		case 'N':
			t.nacks[e.why]++
		case 'R':
			if e.rc != 0 {
				t.refused++
			}
		case 'Z':
			t.stopped = true
		}
	}
	return t, nil
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sourceResult turns a condition into a result carrying the tally's loss and duplication.
func sourceResult(expected, observed string, ok bool, t sourceTally) Result {
	v := Fail
	if ok {
		v = Pass
	}
	return Result{Expected: expected, Observed: observed, Verdict: v, Lost: t.lost, Duplicated: t.duplicated}
}

// clean reports whether nothing wrong was stored or recorded besides loss and duplication.
func (t sourceTally) clean() bool {
	return t.poisoned == 0 && t.unknown == 0 && t.refused == 0 && t.early == 0 && !t.stopped
}

// beginSource is a source scenario's prologue: a fixture whose runtime reaches Iggy at
// addr ("" = the server's address) with its HTTP API on a free loopback port when http is
// set, and one runtime instance started. Its error goes to outcome (a runtime that did not
// start is "not supported"). The caller kills the process.
func (r *Runner) beginSource(ctx context.Context, scenario string, c sourceConnector, addr string, http bool) (*sourceFixture, *proc, error) {
	f, err := r.newSourceFixture(ctx, scenario, c)
	if err != nil {
		return nil, nil, err
	}
	if addr != "" {
		f.addr = addr
	}
	if http {
		if f.http, err = freeLoopback(); err != nil {
			return nil, nil, err
		}
	}
	p, err := f.start(ctx)
	if err != nil {
		return nil, nil, notStarted{err}
	}
	return f, p, nil
}

// ackedStoredWait bounds how long a scenario waits, once the probe produced everything,
// for Iggy to hold what the probe saw ACKed.
const ackedStoredWait = 10 * time.Second

// waitAckedStored waits (at most ackedStoredWait) until the topic holds every message of
// every batch the probe saw ACKed, poison excepted, before the scenario stops the runtime.
// A conforming runtime ACKs only what Iggy stored, so it never waits here. One that ACKs
// early would otherwise be stopped at a moment scheduling picks (its last batch sent or
// still waiting to be taken), and what it is seen to do would change from run to run. A
// runtime that ACKed messages and lost them is not waited for past the bound: the tally
// reports the loss.
func (f *sourceFixture) waitAckedStored(ctx context.Context) error {
	acked := map[uint64]bool{}
	for _, e := range f.events() {
		if e.kind != 'A' {
			continue
		}
		for s := e.first; s < e.first+e.count; s++ {
			if !f.poison(s) {
				acked[s] = true
			}
		}
	}
	deadline := time.Now().Add(ackedStoredWait)
	for {
		msgs, err := f.read(ctx)
		if err != nil {
			return err
		}
		held := map[uint64]bool{}
		for _, m := range msgs {
			if acked[m.seq] {
				held[m.seq] = true
			}
		}
		if len(held) == len(acked) || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// runToEnd is a source scenario's epilogue: wait until the probe produced everything and
// Iggy holds what it saw ACKed, stop the runtime with SIGTERM and tally. Only a runtime
// that does not stop in time is an error; its exit status is not judged here.
func (f *sourceFixture) runToEnd(ctx context.Context, p *proc) (sourceTally, error) {
	if err := f.waitProduced(ctx); err != nil {
		return sourceTally{}, err
	}
	if err := f.waitAckedStored(ctx); err != nil {
		return sourceTally{}, err
	}
	if err := p.term(20 * time.Second); errors.Is(err, errNoExit) {
		return sourceTally{}, err
	}
	return f.tally(ctx)
}

func runSourceClean(ctx context.Context, r *Runner, _ string) Result {
	const expected = "600 messages in 12 batches: each stored once, in order; 12 ACKs, each after Iggy stored the batch; no NACK; a restart resumes at 600 (the state was saved)"
	f, p, err := r.beginSource(ctx, "source-clean", sourceConnector{total: 600, batch: 50}, "", false)
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	if err := f.waitProduced(ctx); err != nil {
		return broken(expected, err)
	}
	if err := f.waitAckedStored(ctx); err != nil {
		return broken(expected, err)
	}
	if err := p.term(20 * time.Second); err != nil {
		return broken(expected, err)
	}
	if p, err = f.start(ctx); err != nil {
		return broken(expected, err)
	}
	defer p.kill()
	resumed := int64(-1)
	for _, e := range f.events() {
		if e.kind == 'O' {
			resumed = int64(e.at)
		}
	}
	t, err := f.runToEnd(ctx, p)
	if err != nil {
		return broken(expected, err)
	}
	obs := fmt.Sprintf("%s; restarted at %d", t, resumed)
	ok := t.clean() && t.closed == 0 && t.lost == 0 && t.duplicated == 0 && t.outOfOrder == 0 && t.stored == 600 &&
		t.acks == 12 && t.nackCount() == 0 && resumed == 600
	return sourceResult(expected, obs, ok, t)
}

// minSourceKills is how many times source-sigkill SIGKILLs the runtime at least (--soak
// raises it).
const minSourceKills = 5

func runSourceSigkill(ctx context.Context, r *Runner, _ string) Result {
	const batch = 20
	kills := max(minSourceKills, r.cfg.Soak)
	// A kill waits for 3..12 more ACKs, then up to 20 ms while the probe goes on (a batch
	// every 2 ms or so), so a run between two kills ACKs about 15 batches on a fast machine:
	// 40 per kill leave the source producing at every kill on any machine; if it ever ends
	// first, the scenario says so instead of waiting for ACKs that cannot come.
	total := batch * (40*kills + 10)
	expected := fmt.Sprintf("%d SIGKILLs while the source produces %d messages: lost 0, duplicated ≤ %d (one unsaved batch per kill), no batch ACKed before Iggy stored it", kills, total, kills*batch)
	rng := rand.New(rand.NewSource(r.cfg.Seed))
	f, p, err := r.beginSource(ctx, "source-sigkill", sourceConnector{total: total, batch: batch, intervalMS: 2}, "", false)
	if err != nil {
		return outcome(expected, err)
	}
	for k := 0; k < kills; k++ {
		// The kill lands a seeded number of ACKs into this run, plus a seeded pause: with a
		// batch being sent, saved or acknowledged.
		target := f.count('A') + 3 + rng.Intn(10)
		ended := f.count('D')
		err := f.wait(ctx, fmt.Sprintf("%d ACKs before kill %d", target, k+1), func() bool {
			return f.count('A') >= target || p.exited() || f.count('D') > ended
		})
		if err == nil && f.count('A') < target && f.count('D') > ended {
			err = fmt.Errorf("the source produced all %d messages before kill %d: the data did not outlast the kills", total, k+1)
		}
		if err != nil {
			p.kill()
			return broken(expected, err)
		}
		time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond)
		p.kill()
		if p, err = f.start(ctx); err != nil {
			return broken(expected, fmt.Errorf("restart after kill %d: %w", k+1, err))
		}
	}
	defer p.kill()
	t, err := f.runToEnd(ctx, p)
	if err != nil {
		return broken(expected, err)
	}
	ok := t.clean() && t.lost == 0 && t.duplicated <= kills*batch
	res := sourceResult(expected, fmt.Sprintf("%d kills; %s", kills, t), ok, t)
	res.Kills = kills
	return res
}

func runSourcePoison(ctx context.Context, r *Runner, _ string) Result {
	const expected = "on_failure = skip: the 8 of 200 messages that are not JSON are skipped one by one; the other 192 stored once; the 4 batches ACKed, no NACK, the source keeps running"
	f, p, err := r.beginSource(ctx, "source-poison", sourceConnector{total: 200, batch: 50, poisonEvery: 25, onFailure: "skip"}, "", false)
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	t, err := f.runToEnd(ctx, p)
	if err != nil {
		return broken(expected, err)
	}
	ok := t.clean() && t.closed == 0 && t.lost == 0 && t.duplicated == 0 && t.stored == 192 && t.acks == 4 && t.nackCount() == 0
	return sourceResult(expected, t.String(), ok, t)
}

func runSourceOutage(ctx context.Context, r *Runner, _ string) Result {
	const expected = "Iggy becomes unreachable with the source producing, and the runtime gets SIGTERM with a batch unsent: it exits within 20 s without ACKing that batch; restarted with Iggy back: lost 0, no batch ACKed before Iggy stored it"
	px, err := StartProxy(r.addr, ProxyFaults{Seed: r.cfg.Seed})
	if err != nil {
		return broken(expected, err)
	}
	defer px.Close()
	// The probe pauses 300 ms after each ACK, so the proxy usually goes down between two
	// batches and the next one is handed over after it (see below).
	f, p, err := r.beginSource(ctx, "source-outage", sourceConnector{total: 200, batch: 20, intervalMS: 300}, px.Addr(), false)
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	if err := f.wait(ctx, "3 ACKs", func() bool { return f.count('A') >= 3 }); err != nil {
		return broken(expected, err)
	}
	px.SetDown(true)
	// A batch handed over after the server went away cannot have been sent: wait for one
	// the runtime accepted (its S line comes after the proxy went down, its B line says 0).
	// (Had the proxy gone down with a batch in flight, that one is not taken: the probe
	// gives up on it after its 30 s result timeout and hands over the next.)
	handed := len(f.events())
	var unsent uint64
	err = f.wait(ctx, "a batch handed to the runtime while Iggy is unreachable", func() bool {
		ev := f.events()
		var cand uint64
		for _, e := range ev[min(handed, len(ev)):] {
			switch {
			case e.kind == 'S' && cand == 0:
				cand = e.batch
			case e.kind == 'B' && cand != 0 && e.batch == cand:
				if e.rc == 0 {
					unsent = cand
					return true
				}
				cand = 0 // refused by the callback: the probe resends it as a new batch
			}
		}
		return false
	})
	if err != nil {
		return broken(expected, err)
	}
	// The exit status is reported, not judged: a runtime may exit non-zero because a
	// connector was failing when it stopped (Ferry does).
	exit := "exit 0"
	termErr := p.term(20 * time.Second)
	if termErr != nil {
		exit = termErr.Error()
	}
	fate := "no result"
	for _, e := range f.events() {
		if e.batch == unsent && (e.kind == 'A' || e.kind == 'N') {
			fate = map[byte]string{'A': "ACKed", 'N': "NACKed (" + e.why + ")"}[e.kind]
		}
	}
	px.SetDown(false)
	if p, err = f.start(ctx); err != nil {
		return broken(expected, err)
	}
	defer p.kill()
	t, err := f.runToEnd(ctx, p)
	if err != nil {
		return broken(expected, err)
	}
	obs := fmt.Sprintf("%s; the unsent batch %d: %s; %s", exit, unsent, fate, t)
	ok := !errors.Is(termErr, errNoExit) && fate != "ACKed" && t.clean() && t.lost == 0
	return sourceResult(expected, obs, ok, t)
}

// slowResult is how long source-late-result holds Iggy's replies after the probe's one
// timeout: longer than that timeout (1 s), far below the 30 s the probe waits after it.
const slowResult = 2500 * time.Millisecond

func runSourceLateResult(ctx context.Context, r *Runner, _ string) Result {
	const expected = "a batch's send is held past the probe's result timeout (1 s here until it first expires, then 30 s as in the SDK): the probe NACKs and resends it, the runtime's late ACK is refused (-1) and ignored; a later batch's result held 2.5 s is waited for; the source produces to the end: lost 0, duplicated 20 (that batch stored twice)"
	px, err := StartProxy(r.addr, ProxyFaults{Seed: r.cfg.Seed})
	if err != nil {
		return broken(expected, err)
	}
	defer px.Close()
	f, p, err := r.beginSource(ctx, "source-late-result", sourceConnector{total: 200, batch: 20, intervalMS: 50, resultTimeoutMS: 1000, resultTimeoutOnce: true}, px.Addr(), false)
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	if err := f.wait(ctx, "3 ACKs", func() bool { return f.count('A') >= 3 }); err != nil {
		return broken(expected, err)
	}
	// Hold every reply until the probe gave up on a batch, then let them through: the
	// runtime's send of that batch completes after the probe's timeout, whatever the speed.
	// The probe waits 30 s for every result after that one timeout, so a send that is only
	// slow (a loaded machine) is not taken for a second.
	px.StallAll(time.Hour)
	err = f.wait(ctx, "the probe's result timeout", func() bool {
		for _, e := range f.events() {
			if e.kind == 'N' && e.why == "timeout" {
				return true
			}
		}
		return false
	})
	acked := f.count('A')
	px.Release()
	if err != nil {
		return broken(expected, err)
	}
	// Once the resend is ACKed, hold the replies once more, past 1 s: the next batch waits
	// that long for its result and is ACKed, not given up (a probe still at 1 s would NACK
	// it, and its resend would be a second duplicate batch).
	if err := f.wait(ctx, "the resend's ACK", func() bool { return f.count('A') > acked }); err != nil {
		return broken(expected, err)
	}
	px.StallAll(slowResult)
	t, err := f.runToEnd(ctx, p)
	if err != nil {
		return broken(expected, err)
	}
	ok := t.lost == 0 && t.duplicated == 20 && t.refused == 1 && t.nacks["timeout"] == 1 && t.closed == 0 &&
		!t.stopped && t.poisoned == 0 && t.unknown == 0 && t.early == 0
	return sourceResult(expected, t.String(), ok, t)
}

func runSourceStoppedStatus(ctx context.Context, r *Runner, _ string) Result {
	const expected = `on_failure = stop, the first batch holds a message that is not JSON: the batch is NACKed, nothing of it stored; GET /sources/{key} status "error" (or "stopped") with last_error; /metrics: iggy_connector_errors_total ≥ 1 for the source, iggy_connectors_sources_running 0`
	f, p, err := r.beginSource(ctx, "source-stopped-status", sourceConnector{total: 100, batch: 50, poisonEvery: 25, onFailure: "stop"}, "", true)
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	if err := f.wait(ctx, "the runtime's NACK of the first batch", func() bool {
		for _, e := range f.events() {
			if e.kind == 'N' || e.kind == 'A' {
				return true
			}
		}
		return false
	}); err != nil {
		return broken(expected, err)
	}
	obs, noAPI, err := apiWatch{addr: f.http, kind: "sources", key: f.key, waitFor: f.wait}.stopped(ctx)
	if noAPI != nil {
		return unsupported(expected, noAPI)
	}
	_ = p.term(20 * time.Second)
	t, terr := f.tally(ctx)
	if terr != nil {
		return broken(expected, terr)
	}
	first := ""
	for _, e := range f.events() {
		if e.kind == 'N' || e.kind == 'A' {
			first = map[byte]string{'A': "ACKed", 'N': "NACKed (" + e.why + ")"}[e.kind]
			break
		}
	}
	obs = fmt.Sprintf("the first batch %s; %d stored; %s", first, t.stored, obs)
	ok := err == nil && first == "NACKed (runtime)" && t.stored == 0 && t.poisoned == 0 && t.unknown == 0
	return sourceResult(expected, obs, ok, sourceTally{})
}
