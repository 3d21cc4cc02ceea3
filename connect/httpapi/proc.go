package httpapi

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procRoot is where the probe reads /proc and /sys from ("/" in production).
const procRoot = "/"

// clockTicks is USER_HZ, the unit of /proc/self/stat's CPU times: 100 on every Linux
// architecture Go supports (sysconf(_SC_CLK_TCK) needs cgo).
const clockTicks = 100

// probe reads the process's and the machine's CPU and memory figures of /stats from
// /proc (and cgroup v2). The CPU figures are averages since the previous read. On a
// system without /proc every figure is 0. Safe for concurrent use.
type probe struct {
	root string

	mu        sync.Mutex
	lastWall  time.Time
	lastProc  uint64 // process CPU time, clock ticks
	lastTotal uint64 // machine CPU time, every state, ticks
	lastIdle  uint64 // machine idle + iowait ticks
}

func newProbe(root string) *probe {
	p := &probe{root: root, lastWall: time.Now()}
	p.lastProc, _ = p.processTicks()
	p.lastTotal, p.lastIdle, _ = p.machineTicks()
	return p
}

// sample is one read of the probe.
type sample struct {
	CPU, TotalCPU         float32 // percent: the process (may pass 100 with several cores), the machine
	RSS, Total, Available uint64  // bytes
}

func (p *probe) read() sample {
	var out sample
	now := time.Now()
	proc, okP := p.processTicks()
	total, idle, okM := p.machineTicks()
	p.mu.Lock()
	if wall := now.Sub(p.lastWall).Seconds(); okP && wall > 0 && proc >= p.lastProc {
		out.CPU = float32(float64(proc-p.lastProc) / clockTicks / wall * 100)
	}
	if okM && total > p.lastTotal && idle >= p.lastIdle {
		dt, di := total-p.lastTotal, idle-p.lastIdle
		if di <= dt {
			out.TotalCPU = float32(float64(dt-di) / float64(dt) * 100)
		}
	}
	p.lastWall, p.lastProc, p.lastTotal, p.lastIdle = now, proc, total, idle
	p.mu.Unlock()

	out.RSS = p.statusKB("proc/self/status", "VmRSS")
	mem := p.meminfo()
	out.Total, out.Available = mem["MemTotal"], mem["MemAvailable"]
	if limit, ok := p.cgroupNumber("memory.max"); ok && limit > 0 && (out.Total == 0 || limit < out.Total) {
		out.Total = limit
		if used, ok := p.cgroupNumber("memory.current"); ok {
			out.Available = min(out.Available, limit-min(used, limit))
		}
	}
	return out
}

func (p *probe) file(rel string) ([]byte, bool) {
	b, err := os.ReadFile(filepath.Join(p.root, rel))
	return b, err == nil
}

// processTicks is utime + stime of /proc/self/stat (fields 14 and 15).
func (p *probe) processTicks() (uint64, bool) {
	b, ok := p.file("proc/self/stat")
	if !ok {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return ut + st, true
}

// machineTicks reads the "cpu" line of /proc/stat: every state summed, and idle + iowait.
func (p *probe) machineTicks() (total, idle uint64, ok bool) {
	b, ok := p.file("proc/stat")
	if !ok {
		return 0, 0, false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, false
	}
	// user nice system idle iowait irq softirq steal (guest time is inside user).
	for i, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	return total, idle, true
}

// statusKB reads a "Name: N kB" line of a /proc status file, in bytes.
func (p *probe) statusKB(rel, name string) uint64 {
	b, ok := p.file(rel)
	if !ok {
		return 0
	}
	return kbLines(b)[name]
}

func (p *probe) meminfo() map[string]uint64 {
	b, _ := p.file("proc/meminfo")
	return kbLines(b)
}

// kbLines parses "Name:   N kB" lines into bytes by name.
func kbLines(b []byte) map[string]uint64 {
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		out[name] = n
	}
	return out
}

// cgroupNumber reads a number file of the process's cgroup v2 directory; false when the
// file is missing or holds no number ("max").
func (p *probe) cgroupNumber(name string) (uint64, bool) {
	dir := "sys/fs/cgroup"
	if b, ok := p.file("proc/self/cgroup"); ok {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "0::"); ok && rest != "/" && rest != "" {
				if _, found := p.file(filepath.Join(dir, rest, name)); found {
					dir = filepath.Join(dir, rest)
				}
			}
		}
	}
	b, ok := p.file(filepath.Join(dir, name))
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}
