package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/kafkatest"
)

// preflight runs the source's Preflight on cfg: its errors one per line, "" for none.
func preflight(t *testing.T, cfg map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := New().Preflight(ctx, raw)
	if len(errs) == 0 {
		return ""
	}
	return errors.Join(errs...).Error()
}

// TestSourcePreflight: existing topics, a pattern that matches and a named group pass, and
// the group is not joined; missing topics and a pattern that matches nothing name the key
// and the fix.
func TestSourcePreflight(t *testing.T) {
	b := kafkatest.Connect(t)
	topic := b.Topic(t, 2)
	group := kafkatest.Name(t, "g")
	cfg := map[string]any{"bootstrap_servers": []string{b.Bootstrap}, "topics": []string{topic}, "consumer_group": group}
	if got := preflight(t, cfg); got != "" {
		t.Fatalf("an existing topic: %s", got)
	}
	groups, err := b.Admin.ListGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := groups[group]; ok {
		t.Errorf("the check joined group %q", group)
	}
	if got := preflight(t, map[string]any{"bootstrap_servers": []string{b.Bootstrap}, "topic_pattern": topic[:len(topic)-1] + ".*"}); got != "" {
		t.Errorf("a pattern that matches: %s", got)
	}
	m1, m2 := kafkatest.Name(t, "m1"), kafkatest.Name(t, "m2")
	got := preflight(t, map[string]any{"bootstrap_servers": []string{b.Bootstrap}, "topics": []string{topic, m1, m2}})
	want := fmt.Sprintf(`plugin_config.topics: the cluster at bootstrap_servers %s has no topic %q, %q: create it, or fix topics`, b.Bootstrap, m1, m2)
	if got != want {
		t.Errorf("missing topics:\n got %s\nwant %s", got, want)
	}
	got = preflight(t, map[string]any{"bootstrap_servers": []string{b.Bootstrap}, "topic_pattern": "nothing-matches-[0-9]+"})
	want = fmt.Sprintf(`plugin_config.topic_pattern: no topic the anonymous user may read matches "nothing-matches-[0-9]+" on bootstrap_servers %s: create one, or fix the pattern (the source would wait, reading nothing)`, b.Bootstrap)
	if got != want {
		t.Errorf("a pattern that matches nothing:\n got %s\nwant %s", got, want)
	}
}
