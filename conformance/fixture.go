package conformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

// connector is what one scenario's connector file says.
type connector struct {
	mode       string
	batch      int
	schema     string // raw (default) or json
	onFailure  string // "" = the runtime's default
	maxRetries int    // -1 = no [retry] table
	probe      map[string]string
	// plugin and pluginConfig replace the probe and its plugin_config (postgres-soak's
	// PostgreSQL sink); pluginConfig values are TOML.
	plugin       string
	pluginConfig map[string]string
}

// fixture is one scenario run: its own stream, connector key (so consumer group) and files.
type fixture struct {
	r          *Runner
	name       string
	dir        string
	stream     string
	topic      string
	key        string
	partitions uint32
	record     string
	addr       string // the address the runtime is given (the server's or a proxy's)
	conn       connector
	sent       map[pkey]uint64 // expected payload hash per message
	poison     map[pkey]bool   // messages the runtime must not deliver
	next       map[uint32]uint64
	instances  int
	http       string // "" = [http] off; else the runtime's HTTP API address, metrics on
	// from is how many record events the tally skips: those of a topic since deleted
	// and created again (topic-recreated).
	from int
}

type pkey struct {
	p   uint32
	off uint64
}

func (r *Runner) newFixture(ctx context.Context, scenario, mode string, partitions uint32, c connector) (*fixture, error) {
	r.seq++
	name := fmt.Sprintf("%s-%s-%d", scenario, mode, r.seq)
	f := &fixture{
		r: r, name: name, dir: filepath.Join(r.dir, name), stream: "conformance-" + name, topic: "t",
		key: fmt.Sprintf("probe%d", r.seq), partitions: partitions, addr: r.addr, conn: c,
		sent: map[pkey]uint64{}, poison: map[pkey]bool{}, next: map[uint32]uint64{},
	}
	f.conn.mode = mode
	f.record = filepath.Join(f.dir, "record.txt")
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return nil, err
	}
	if err := r.admin.EnsureTopic(ctx, f.stream, f.topic, partitions); err != nil {
		return nil, fmt.Errorf("create topic: %w", err)
	}
	return f, nil
}

func (f *fixture) group() string { return "iggy-connect-sink-" + f.key }

func hash(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

// produce sends n messages to every partition; payload(p, i) may override the payload
// (nil = default); poisoned marks messages that must never reach the sink.
func (f *fixture) produce(ctx context.Context, n int, payload func(p uint32, i int) ([]byte, bool)) error {
	for p := uint32(0); p < f.partitions; p++ {
		for i := 0; i < n; {
			var msgs []iggy.Message
			for ; i < n && len(msgs) < 500; i++ {
				off := f.next[p]
				b := []byte(fmt.Sprintf(`{"scenario":%q,"p":%d,"n":%d}`, f.name, p, off))
				poisoned := false
				if payload != nil {
					if pb, bad := payload(p, int(off)); pb != nil {
						b, poisoned = pb, bad
					}
				}
				f.sent[pkey{p, off}] = hash(b)
				if poisoned {
					f.poison[pkey{p, off}] = true
				}
				f.next[p]++
				msgs = append(msgs, iggy.Message{Payload: b})
			}
			if _, err := f.r.admin.SendMessages(ctx, iggy.Name(f.stream), iggy.Name(f.topic), wire.ToPartition(p), msgs); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
		}
	}
	return nil
}

// writeConfig writes one runtime instance's config.toml and connector file and returns
// the config path. probeOverride replaces plugin_config entries for this instance.
func (f *fixture) writeConfig(probeOverride map[string]string) (string, error) {
	f.instances++
	dir := filepath.Join(f.dir, fmt.Sprintf("rt%d", f.instances))
	cdir := filepath.Join(dir, "connectors")
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return "", err
	}
	path, err := f.r.writeRuntimeConfig(dir, filepath.Join(dir, "state"), cdir, f.addr, f.http)
	if err != nil {
		return "", err
	}
	c := f.conn
	var b strings.Builder
	plugin := f.r.probe
	if c.plugin != "" {
		plugin = c.plugin
	}
	fmt.Fprintf(&b, "type = \"sink\"\nkey = %q\nenabled = true\nversion = 0\nname = \"conformance probe\"\npath = %q\n", f.key, plugin)
	if c.mode != AfterPolling { // after_polling is every runtime's default: no Ferry field
		fmt.Fprintf(&b, "offset_commit = %q\n", c.mode)
	}
	if c.onFailure != "" {
		fmt.Fprintf(&b, "on_failure = %q\n", c.onFailure)
	}
	schema := c.schema
	if schema == "" {
		schema = "raw"
	}
	batch := c.batch
	if batch == 0 {
		batch = 100
	}
	fmt.Fprintf(&b, "\n[[streams]]\nstream = %q\ntopics = [%q]\nschema = %q\nbatch_length = %d\npoll_interval = \"5ms\"\n", f.stream, f.topic, schema, batch)
	if c.maxRetries >= 0 {
		fmt.Fprintf(&b, "\n[retry]\nmax_retries = %d\ninitial_backoff = \"10ms\"\nmax_backoff = \"50ms\"\n", c.maxRetries)
	}
	pc := map[string]string{"record": strconv.Quote(f.record)}
	if c.mode == SinkControlled {
		pc["commit"] = `"immediate"`
	}
	for k, v := range c.probe {
		pc[k] = v
	}
	if c.pluginConfig != nil {
		pc = c.pluginConfig
	}
	for k, v := range probeOverride {
		if v == "" {
			delete(pc, k)
		} else {
			pc[k] = v
		}
	}
	keys := slices.Sorted(maps.Keys(pc))
	b.WriteString("\n[plugin_config]\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, pc[k])
	}
	if err := os.WriteFile(filepath.Join(cdir, "probe.toml"), []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// pluginDirs is the TOML list of the directories the runtime may load native plugins
// from: the probes' and a native PostgreSQL plugin's.
func (r *Runner) pluginDirs() string {
	dirs := []string{strconv.Quote(r.dir)}
	if p := r.cfg.PostgresPlugin; p != "" && !strings.HasPrefix(p, "builtin:") {
		if abs, err := filepath.Abs(p); err == nil {
			dirs = append(dirs, strconv.Quote(filepath.Dir(abs)))
		}
	}
	return strings.Join(dirs, ", ")
}

// writeRuntimeConfig writes dir/config.toml: the runtime's Iggy address and credentials, its
// state directory (a source's cursor lives there), connectors read from cdir, the
// directories native plugins may load from (pluginDirs, in Ferry's [plugins]; other
// runtimes ignore the table), and the HTTP API on httpAddr (with metrics) or off when
// httpAddr is empty.
func (r *Runner) writeRuntimeConfig(dir, stateDir, cdir, addr, httpAddr string) (string, error) {
	cfg := fmt.Sprintf(`[iggy]
address = %q
username = %q
password = %q

[state]
path = %q

[connectors]
config_type = "local"
config_dir = %q

[plugins]
directories = [%s]
`, addr, r.cfg.Username, r.cfg.Password, stateDir, cdir, r.pluginDirs())
	if httpAddr == "" {
		cfg += "\n[http]\nenabled = false\n"
	} else {
		cfg += fmt.Sprintf("\n[http]\nenabled = true\naddress = %q\n\n[http.metrics]\nenabled = true\nendpoint = \"/metrics\"\n", httpAddr)
	}
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// start writes a config and starts one runtime instance; it returns once the probe was
// opened by it, or an error (with the runtime's last log lines) when the runtime exited or
// never opened the probe: the caller reports "not supported".
func (f *fixture) start(ctx context.Context, probeOverride map[string]string) (*proc, error) {
	opened := f.count('O')
	path, err := f.writeConfig(probeOverride)
	if err != nil {
		return nil, err
	}
	p, err := f.r.startRuntime(path, filepath.Join(filepath.Dir(path), "runtime.log"))
	if err != nil {
		return nil, err
	}
	err = f.wait(ctx, "the runtime to open the probe", func() bool {
		return f.count('O') > opened || p.exited()
	})
	if err == nil && f.count('O') == opened {
		err = errors.New("runtime exited with status 0 before opening the probe")
		if p.err != nil {
			err = fmt.Errorf("runtime exited (%w) before opening the probe", p.err)
		}
	}
	if err != nil {
		if !p.exited() {
			p.kill()
		}
		return nil, fmt.Errorf("%w; runtime log: %s", err, oneLine(p.tail(5)))
	}
	return p, nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[len(s)-400:]
	}
	return s
}

// wait is the runner's wait (Runner.wait).
func (f *fixture) wait(ctx context.Context, what string, cond func() bool) error {
	return f.r.wait(ctx, what, cond)
}

// wait polls cond every 20ms until it holds, ctx ends or the runner's timeout passes (a
// safety net: every scenario waits for an event, never for a length of time).
func (r *Runner) wait(ctx context.Context, what string, cond func() bool) error {
	deadline := time.Now().Add(r.cfg.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", r.cfg.Timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// event is one line of the probe's record file.
type event struct {
	kind  byte
	p     uint32
	off   uint64
	count uint64
	hash  uint64
	name  string
	rc    int
	pid   int // 'M' and 'O': the recording process (0 in a record without pids)
}

// events parses the record file; an unterminated last line (a write cut by a kill) is
// ignored.
func (f *fixture) events() []event {
	b, err := os.ReadFile(f.record)
	if err != nil {
		return nil
	}
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var out []event
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 || len(fs[0]) != 1 {
			continue
		}
		e := event{kind: fs[0][0]}
		num := func(i int) uint64 {
			if i >= len(fs) {
				return 0
			}
			v, _ := strconv.ParseUint(fs[i], 10, 64)
			return v
		}
		switch e.kind {
		case 'M':
			if len(fs) != 4 && len(fs) != 5 {
				continue
			}
			e.p, e.off, e.pid = uint32(num(1)), num(2), int(num(4))
			e.hash, _ = strconv.ParseUint(fs[3], 16, 64)
		case 'O':
			e.pid = int(num(2))
		case 'E':
			e.p, e.off, e.count = uint32(num(1)), num(2), num(3)
		case 'F':
			e.p, e.off = uint32(num(1)), num(2)
		case 'C':
			if len(fs) != 3 {
				continue
			}
			e.name = fs[1]
			e.rc, _ = strconv.Atoi(fs[2])
		}
		out = append(out, e)
	}
	return out
}

func (f *fixture) count(kind byte) int {
	n := 0
	for _, e := range f.events() {
		if e.kind == kind {
			n++
		}
	}
	return n
}

// stored returns the group's stored offset per partition (-1 = none).
func (f *fixture) stored(ctx context.Context) (map[uint32]int64, error) {
	out := map[uint32]int64{}
	for p := uint32(0); p < f.partitions; p++ {
		o, found, err := f.r.admin.GetOffset(ctx, wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name(f.group())},
			iggy.Name(f.stream), iggy.Name(f.topic), p)
		if err != nil {
			return nil, err
		}
		out[p] = -1
		if found {
			out[p] = int64(o.StoredOffset)
		}
	}
	return out, nil
}

// waitDone waits until the group's stored offset of every partition is its last
// produced message.
func (f *fixture) waitDone(ctx context.Context) error {
	var last map[uint32]int64
	err := f.wait(ctx, "the stored offsets to reach the end", func() bool {
		s, err := f.stored(ctx)
		if err != nil {
			return false
		}
		last = s
		for p := uint32(0); p < f.partitions; p++ {
			if s[p] != int64(f.next[p])-1 {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w (stored %v, produced %v)", err, last, f.next)
	}
	return nil
}

// settle waits until the stored offsets reach the end, then stops the runtime processes
// with SIGTERM. In after_polling the offsets are stored at poll, before the batches are
// consumed (and a runtime may drop polled batches at shutdown), so it first waits until
// the probe recorded every message or recorded nothing new for a quiet period (a loss
// the scenario may allow).
func (f *fixture) settle(ctx context.Context, procs ...*proc) error {
	if err := f.waitDone(ctx); err != nil {
		return err
	}
	if !atLeastOnce(f.conn.mode) {
		f.quiesce(ctx)
	}
	// Only a runtime that does not stop is held against it here: the exit status of this
	// stop is not what the scenario checks (sigterm-in-flight does).
	for _, p := range procs {
		if err := p.term(20 * time.Second); errors.Is(err, errNoExit) {
			return fmt.Errorf("stopping the runtime at the end: %w", err)
		}
	}
	return nil
}

// quietPeriod is how long after_polling's settle waits for a record that stopped growing.
const quietPeriod = 2 * time.Second

// quiesce waits until every produced message is recorded or the record file did not grow
// for quietPeriod.
func (f *fixture) quiesce(ctx context.Context) {
	size, since := int64(-1), time.Now()
	_ = f.wait(ctx, "the record to be complete or quiet", func() bool {
		if f.tally().lost == 0 {
			return true
		}
		var n int64
		if st, err := os.Stat(f.record); err == nil {
			n = st.Size()
		}
		if n != size {
			size, since = n, time.Now()
		}
		return time.Since(since) >= quietPeriod
	})
}

// tally is what the record says about delivery.
type tally struct {
	delivered  int // distinct messages recorded
	lost       int // produced, not poison, never recorded
	duplicated int // recordings beyond the first
	poisoned   int // poison messages recorded (must be 0)
	corrupt    int // recorded with a payload hash that differs from what was produced
	unknown    int // recorded offsets never produced
}

func (t tally) String() string {
	s := fmt.Sprintf("delivered %d, lost %d, duplicated %d", t.delivered, t.lost, t.duplicated)
	if t.poisoned > 0 {
		s += fmt.Sprintf(", poison delivered %d", t.poisoned)
	}
	if t.corrupt > 0 {
		s += fmt.Sprintf(", corrupt %d", t.corrupt)
	}
	if t.unknown > 0 {
		s += fmt.Sprintf(", unknown offsets %d", t.unknown)
	}
	return s
}

func (f *fixture) tally() tally {
	seen := map[pkey]int{}
	var t tally
	for i, e := range f.events() {
		if e.kind != 'M' || i < f.from {
			continue
		}
		k := pkey{e.p, e.off}
		h, ok := f.sent[k]
		switch {
		case !ok:
			t.unknown++
			continue
		case f.poison[k]:
			t.poisoned++
		case f.conn.schema == "" && h != e.hash:
			t.corrupt++
		}
		seen[k]++
	}
	for k := range f.sent {
		n := seen[k]
		if n == 0 && !f.poison[k] {
			t.lost++
		}
		if n > 0 {
			t.delivered++
			t.duplicated += n - 1
		}
	}
	return t
}
