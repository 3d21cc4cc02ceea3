package server

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// refusalLogInterval is how often one kind of refusal is logged at most.
const refusalLogInterval = 10 * time.Second

// rateLog writes the log lines a client can cause at will (refused connections and
// logins, failed logins, bad frames) at a bounded rate, so that a flood cannot fill the
// disk with logs or bury the one line that matters: per message, the first line of an
// interval is written and the others are counted. The count is written with the
// message's next line (field "suppressed") or, when no line follows, by flush once the
// interval has passed ("… (repeated)", with "suppressed"). A flood of any size thus
// writes at most two lines per message per interval. Messages are constants of the
// server, so the state stays small.
type rateLog struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	kinds map[string]*rateKind
}

type rateKind struct {
	level      slog.Level
	next       time.Time // the next line may be written from then
	suppressed int       // lines counted, not written, since the last written one
}

func newRateLog(log *slog.Logger, every time.Duration, now func() time.Time) *rateLog {
	return &rateLog{log: log, every: every, now: now, kinds: map[string]*rateKind{}}
}

// Warn and Info log msg with args, unless a line of msg was written less than an
// interval ago: then the line is only counted.
func (r *rateLog) Warn(msg string, args ...any) { r.logAt(slog.LevelWarn, msg, args) }
func (r *rateLog) Info(msg string, args ...any) { r.logAt(slog.LevelInfo, msg, args) }

func (r *rateLog) logAt(level slog.Level, msg string, args []any) {
	if !r.log.Enabled(context.Background(), level) {
		return
	}
	now := r.now()
	r.mu.Lock()
	k := r.kinds[msg]
	if k == nil {
		k = &rateKind{level: level}
		r.kinds[msg] = k
	}
	if now.Before(k.next) {
		k.suppressed++
		r.mu.Unlock()
		return
	}
	n := k.suppressed
	k.suppressed, k.next = 0, now.Add(r.every)
	r.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	r.log.Log(context.Background(), level, msg, args...)
}

// flush writes the count of every message whose lines were counted and whose
// interval has passed; the server's maintenance loop calls it.
func (r *rateLog) flush() {
	now := r.now()
	type line struct {
		level slog.Level
		msg   string
		n     int
	}
	var out []line
	r.mu.Lock()
	for msg, k := range r.kinds {
		if k.suppressed > 0 && !now.Before(k.next) {
			out = append(out, line{k.level, msg, k.suppressed})
			k.suppressed, k.next = 0, now.Add(r.every)
		}
	}
	r.mu.Unlock()
	for _, l := range out {
		r.log.Log(context.Background(), l.level, l.msg+" (repeated)", "suppressed", l.n, "interval", r.every)
	}
}
