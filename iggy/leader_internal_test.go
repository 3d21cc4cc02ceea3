package iggy

import (
	"slices"
	"testing"
)

func TestSameAddr(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:8090", "127.0.0.1:8090", true},
		{"localhost:8090", "127.0.0.1:8090", true},
		{"LOCALHOST:8090", "127.0.0.1:8090", true},
		{"[::1]:8090", "[0:0:0:0:0:0:0:1]:8090", true},
		{"node-a:8090", "NODE-A:8090", true},
		{"127.0.0.1:8090", "127.0.0.1:8091", false},
		{"192.168.1.1:8090", "127.0.0.1:8090", false},
		{"node-a:8090", "node-b:8090", false},
		{"node-a:8090", "127.0.0.1:8090", false},
	} {
		if got := sameAddr(tc.a, tc.b); got != tc.want {
			t.Errorf("sameAddr(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestParseSeeds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // nil: an error
	}{
		{"127.0.0.1:8090", []string{"127.0.0.1:8090"}},
		{"a:1, b:2 ,c:3", []string{"a:1", "b:2", "c:3"}},
		{"a:1,localhost:2,127.0.0.1:2", []string{"a:1", "localhost:2"}},
		{"[::1]:8090,b:2", []string{"[::1]:8090", "b:2"}},
		{"", nil},
		{"a:1,", nil},
		{"a:1,,b:2", nil},
		{"a", nil},
		{"a:1,b", nil},
	} {
		got, err := parseSeeds(tc.in)
		if tc.want == nil {
			if err == nil {
				t.Errorf("parseSeeds(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseSeeds(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestRouteCandidates(t *testing.T) {
	r := route{seeds: []string{"a:1", "b:2"}}
	if got, gen := r.candidates(); !slices.Equal(got, []string{"a:1", "b:2"}) || gen != 0 {
		t.Fatalf("candidates = %q, %d", got, gen)
	}
	if changed, gen := r.setLeader("b:2"); !changed || gen != 1 {
		t.Fatalf("setLeader(b:2) = %v, %d", changed, gen)
	}
	if changed, gen := r.setLeader("b:2"); changed || gen != 1 {
		t.Fatalf("setLeader(b:2) again = %v, %d", changed, gen)
	}
	if got, _ := r.candidates(); !slices.Equal(got, []string{"b:2", "a:1"}) {
		t.Fatalf("candidates with leader b = %q", got)
	}
	r.setLeader("c:3")
	if got, gen := r.candidates(); !slices.Equal(got, []string{"c:3", "a:1", "b:2"}) || gen != 2 {
		t.Fatalf("candidates with leader c = %q, %d", got, gen)
	}
}
