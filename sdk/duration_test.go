package sdk

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"5ms", 5 * time.Millisecond},
		{"1 s", time.Second},
		{"1m 30s", 90 * time.Second},
		{"1m30s", 90 * time.Second},
		{"1.5s", 1500 * time.Millisecond},
		{"2h", 2 * time.Hour},
		{"3 days", 72 * time.Hour},
		{"1d", 24 * time.Hour},
		{"1 week", 7 * 24 * time.Hour},
		{"10 sec", 10 * time.Second},
		{"2 min", 2 * time.Minute},
		{"5MS", 5 * time.Millisecond},
		{"100us", 100 * time.Microsecond},
		{"100µs", 100 * time.Microsecond},
		{"7ns", 7},
		{"1 month", 2630016 * time.Second},
		{"1y", 31557600 * time.Second},
		{"0", 0},
		{"none", 0},
		{"Unlimited", 0},
		{"disabled", 0},
		{"  250 ms ", 250 * time.Millisecond},
	} {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "5", "ms", "5 parsecs", "1..5s", ".5s", "-1s", "999999999999h", "1s 5"} {
		if d, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", bad, d)
		}
	}
}

func TestFormatDurationRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{0, 5 * time.Millisecond, 90 * time.Second, 26*time.Hour + 3*time.Nanosecond} {
		got, err := ParseDuration(FormatDuration(d))
		if err != nil || got != d {
			t.Errorf("round trip %v: %q -> %v, %v", d, FormatDuration(d), got, err)
		}
	}
	if s := FormatDuration(90 * time.Second); s != "1m 30s" {
		t.Errorf("FormatDuration(90s) = %q", s)
	}
}
