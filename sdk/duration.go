package sdk

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// humantime units (humantime 2.x names), in nanoseconds. A month is 30.44 days and a year
// 365.25 days, as humantime defines them.
var durationUnits = map[string]int64{
	"nsec": 1, "ns": 1, "nanos": 1,
	"usec": 1e3, "us": 1e3, "µs": 1e3, "micros": 1e3,
	"msec": 1e6, "ms": 1e6, "millis": 1e6,
	"seconds": 1e9, "second": 1e9, "secs": 1e9, "sec": 1e9, "s": 1e9,
	"minutes": 60e9, "minute": 60e9, "mins": 60e9, "min": 60e9, "m": 60e9,
	"hours": 3600e9, "hour": 3600e9, "hrs": 3600e9, "hr": 3600e9, "h": 3600e9,
	"days": 86400e9, "day": 86400e9, "d": 86400e9,
	"weeks": 604800e9, "week": 604800e9, "wks": 604800e9, "wk": 604800e9, "w": 604800e9,
	"months": 2630016e9, "month": 2630016e9,
	"years": 31557600e9, "year": 31557600e9, "yrs": 31557600e9, "yr": 31557600e9, "y": 31557600e9,
}

// ParseDuration parses a duration the way Iggy's runtime does: humantime syntax on the
// lower-cased string ("5ms", "1 s", "1m 30s", "1.5s", "2h", "3 days"), and "0", "unlimited",
// "disabled" or "none" for zero. Units: ns/nsec/nanos, us/µs/usec/micros, ms/msec/millis,
// s/sec/secs/second/seconds, m/min/mins/minute/minutes, h/hr/hrs/hour/hours, d/day/days,
// w/wk/wks/week/weeks, month/months (30.44 days), y/yr/yrs/year/years (365.25 days). A number
// needs a unit; the result must fit a time.Duration.
func ParseDuration(s string) (time.Duration, error) {
	in := strings.ToLower(strings.TrimSpace(s))
	switch in {
	case "":
		return 0, errors.New("empty duration")
	case "0", "unlimited", "disabled", "none":
		return 0, nil
	}
	var total int64
	rest := in
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		num := rest[:i]
		if num == "" || strings.Count(num, ".") > 1 || num[0] == '.' || num[len(num)-1] == '.' {
			return 0, fmt.Errorf("invalid duration %q: expected a number at %q", s, rest)
		}
		rest = strings.TrimLeft(rest[i:], " \t")
		j := 0
		for j < len(rest) && rest[j] != ' ' && rest[j] != '\t' && (rest[j] < '0' || rest[j] > '9') {
			j++
		}
		unit := rest[:j]
		if unit == "" {
			return 0, fmt.Errorf("invalid duration %q: time unit needed after %s, e.g. %sms or %ss", s, num, num, num)
		}
		mult, ok := durationUnits[unit]
		if !ok {
			return 0, fmt.Errorf("invalid duration %q: unknown time unit %q", s, unit)
		}
		whole, frac, _ := strings.Cut(num, ".")
		w, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || (w != 0 && mult > math.MaxInt64/w) {
			return 0, fmt.Errorf("invalid duration %q: too large", s)
		}
		add := w * mult
		if frac != "" {
			f, _ := strconv.ParseFloat("0."+frac, 64)
			add += int64(f * float64(mult))
		}
		if add > math.MaxInt64-total {
			return 0, fmt.Errorf("invalid duration %q: too large", s)
		}
		total += add
		rest = strings.TrimLeft(rest[j:], " \t")
	}
	return time.Duration(total), nil
}

// FormatDuration renders d in the humantime style ParseDuration reads back ("1m 30s").
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	type u struct {
		name string
		n    time.Duration
	}
	units := []u{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second},
		{"ms", time.Millisecond}, {"us", time.Microsecond}, {"ns", 1}}
	var parts []string
	for _, x := range units {
		if d >= x.n {
			parts = append(parts, fmt.Sprintf("%d%s", d/x.n, x.name))
			d %= x.n
		}
	}
	return strings.Join(parts, " ")
}
