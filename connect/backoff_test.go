package connect

import (
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	ms := time.Millisecond
	b := Backoff{Initial: 100 * ms, Max: 1000 * ms}
	for n, want := range map[int]time.Duration{1: 100 * ms, 2: 200 * ms, 3: 400 * ms, 4: 800 * ms, 5: 1000 * ms, 60: 1000 * ms, 1000: 1000 * ms} {
		if got := b.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
	if got := (Backoff{Initial: 50 * ms, Max: ms}).Delay(3); got != 50*ms {
		t.Errorf("max below initial: %v, want 50ms", got)
	}
}
