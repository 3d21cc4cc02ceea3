package httpapi

import (
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/testkit"
)

func TestStats(t *testing.T) {
	started := time.Now().Add(-2 * time.Second)
	e := newEnv(t)
	a := e.serve(func(o *Options) { o.Started = started })
	e.fill(10)
	testkit.WaitFor(t, "both sinks delivered the 10 messages", func() bool {
		return e.status("sink", "bare").Stats.Delivered == 10 && e.status("sink", "nsink").Stats.Delivered == 10
	})
	m := a.do("GET", "/stats", "").want(t, http.StatusOK).object(t)
	wantKeys(t, "stats", m, "connectors_runtime_version", "connectors_runtime_version_semver", "process_id", "cpu_usage",
		"total_cpu_usage", "memory_usage", "total_memory", "available_memory", "run_time", "start_time", "sources_total",
		"sources_running", "sinks_total", "sinks_running", "connectors")
	if m["connectors_runtime_version"] != "0.5.0" || m["connectors_runtime_version_semver"] != 5000.0 {
		t.Errorf("version = %v / %v", m["connectors_runtime_version"], m["connectors_runtime_version_semver"])
	}
	if m["process_id"] != float64(os.Getpid()) {
		t.Errorf("process_id = %v, want %d", m["process_id"], os.Getpid())
	}
	// sinks_total counts the disabled sink too; running counts only what runs.
	if m["sinks_total"] != 3.0 || m["sinks_running"] != 2.0 || m["sources_total"] != 1.0 || m["sources_running"] != 1.0 {
		t.Errorf("totals: sinks %v/%v sources %v/%v", m["sinks_total"], m["sinks_running"], m["sources_total"], m["sources_running"])
	}
	if st := m["start_time"].(float64); st != float64(started.UnixMicro()) {
		t.Errorf("start_time = %v, want %d", st, started.UnixMicro())
	}
	if rt := m["run_time"].(float64); rt < 2e6 || rt > 60e6 {
		t.Errorf("run_time = %v µs, want about 2 s", rt)
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		total, avail, rss := m["total_memory"].(float64), m["available_memory"].(float64), m["memory_usage"].(float64)
		if rss <= 0 || total <= 0 || avail <= 0 || avail > total || rss > total {
			t.Errorf("memory: usage %v, total %v, available %v", rss, total, avail)
		}
		if cpu := m["total_cpu_usage"].(float64); cpu < 0 || cpu > 100 {
			t.Errorf("total_cpu_usage = %v", cpu)
		}
		if cpu := m["cpu_usage"].(float64); cpu < 0 {
			t.Errorf("cpu_usage = %v", cpu)
		}
	}
	cs := m["connectors"].([]any)
	if len(cs) != 3 {
		t.Fatalf("connectors = %v", cs)
	}
	src := cs[0].(map[string]any)
	wantKeys(t, "source", src, "key", "name", "connector_type", "version", "status", "enabled",
		"messages_produced", "messages_sent", "messages_filtered", "errors")
	// A built-in connector's version is "builtin" (not major.minor.patch: no version_semver).
	if src["key"] != "gen" || src["name"] != "generator" || src["connector_type"] != "source" || src["version"] != "builtin" ||
		src["status"] != "running" || src["enabled"] != true || src["errors"] != 0.0 {
		t.Errorf("source = %v", src)
	}
	for i, want := range []struct{ key, name string }{{"bare", "bare sink"}, {"nsink", "null sink"}} {
		c := cs[i+1].(map[string]any)
		wantKeys(t, want.key, c, "key", "name", "connector_type", "version", "status", "enabled",
			"messages_consumed", "messages_processed", "messages_filtered", "errors")
		if c["key"] != want.key || c["name"] != want.name || c["connector_type"] != "sink" || c["version"] != "builtin" ||
			c["status"] != "running" || c["enabled"] != true || c["errors"] != 0.0 ||
			c["messages_consumed"] != 10.0 || c["messages_processed"] != 10.0 || c["messages_filtered"] != 0.0 {
			t.Errorf("sink %d = %v", i, c)
		}
	}

	// A stopped sink is still listed, and no longer counted as running.
	a.do("POST", "/sinks/bare/stop", "").want(t, http.StatusNoContent)
	m = a.do("GET", "/stats", "").want(t, http.StatusOK).object(t)
	if m["sinks_total"] != 3.0 || m["sinks_running"] != 1.0 || m["sources_running"] != 1.0 {
		t.Errorf("totals after a stop: sinks %v/%v sources running %v", m["sinks_total"], m["sinks_running"], m["sources_running"])
	}
	if c := m["connectors"].([]any)[1].(map[string]any); c["key"] != "bare" || c["status"] != "stopped" || c["enabled"] != true {
		t.Errorf("stopped sink = %v", c)
	}
}

func TestStatsVersionUnknown(t *testing.T) {
	a := newEnv(t).serve(func(o *Options) { o.Version = "" })
	m := a.do("GET", "/stats", "").want(t, http.StatusOK).object(t)
	if _, ok := m["connectors_runtime_version_semver"]; ok || m["connectors_runtime_version"] != "unknown" {
		t.Fatalf("version = %v, semver %v", m["connectors_runtime_version"], m["connectors_runtime_version_semver"])
	}
}

func TestSemver(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"0.5.0", 5000, true},
		{"1.2.3", 1002003, true},
		{"v0.3.1", 3001, true},
		{"0.4.0-edge.3", 4000, true},
		{"1.0.0+build.7", 1000000, true},
		{"2.10.100", 2010100, true},
		{"1.2.3.4", 1002003, true},
		{"1.2", 0, false},
		{"unknown", 0, false},
		{"(devel)", 0, false},
		{"", 0, false},
		{"5000.0.0", 0, false}, // 5000000000 does not fit a u32
	} {
		got, ok := semver(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("semver(%q) = %d, %t; want %d, %t", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestProbe(t *testing.T) {
	root := t.TempDir()
	stat := func(utime, stime int) string {
		// Field 2 holds spaces and parentheses, as a command name may.
		return "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 " + strconv.Itoa(utime) + " " + strconv.Itoa(stime) + " 0 0 20 0 8 0 1000 0 0\n"
	}
	writeFiles(t, root, map[string]string{
		"proc/self/stat":   stat(100, 50),
		"proc/stat":        "cpu  1000 0 1000 7000 1000 0 0 0 0 0\ncpu0 1 2 3 4\n",
		"proc/self/status": "Name:\tferry\nVmRSS:\t    2048 kB\nThreads:\t8\n",
		"proc/meminfo":     "MemTotal:       16000000 kB\nMemFree:        1000 kB\nMemAvailable:    8000000 kB\n",
		"proc/self/cgroup": "0::/\n",
		// cgroup v2 without a limit.
		"sys/fs/cgroup/memory.max": "max\n",
	})
	p := newProbe(root)
	p.lastWall = time.Now().Add(-time.Second)
	writeFiles(t, root, map[string]string{
		"proc/self/stat": stat(130, 70), // +50 ticks = 0.5 s of CPU in about 1 s
		"proc/stat":      "cpu  1500 0 1500 8500 1500 0 0 0 0 0\n",
	})
	s := p.read()
	if s.CPU < 40 || s.CPU > 51 {
		t.Errorf("CPU = %v, want about 50", s.CPU)
	}
	// user +500, system +500, idle +1500, iowait +500: 1000 busy ticks of 3000.
	if want := float32(1000) / 3000 * 100; math.Abs(float64(s.TotalCPU-want)) > 0.01 {
		t.Errorf("TotalCPU = %v, want %v", s.TotalCPU, want)
	}
	if s.RSS != 2048*1024 || s.Total != 16000000*1024 || s.Available != 8000000*1024 {
		t.Errorf("memory = %+v", s)
	}

	// A memory limit in the process's cgroup: total is the limit, available what is left.
	writeFiles(t, root, map[string]string{
		"proc/self/cgroup":                         "0::/ferry.slice\n",
		"sys/fs/cgroup/ferry.slice/memory.max":     "1073741824\n",
		"sys/fs/cgroup/ferry.slice/memory.current": "1000000000\n",
	})
	s = p.read()
	if s.Total != 1073741824 || s.Available != 73741824 {
		t.Errorf("cgroup memory = %+v", s)
	}
	// Nothing readable: zeros, no panic.
	if s := newProbe(t.TempDir()).read(); s != (sample{}) {
		t.Errorf("empty root = %+v", s)
	}
}
