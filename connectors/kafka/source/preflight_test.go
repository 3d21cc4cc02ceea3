package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/ferryio/ferry/internal/kafkatest"
	"github.com/ferryio/ferry/internal/testkit"
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

// TestSourcePreflightRefused: a user denied DESCRIBE on a topic and on the group gets an
// error for each naming the key and the ACL; a pattern matching only topics the user may
// not see matches nothing for it.
func TestSourcePreflightRefused(t *testing.T) {
	b := kafkatest.Connect(t)
	topic := b.Topic(t, 1)
	group := kafkatest.Name(t, "g")
	user := "User:" + b.Limited
	b.ACLs(t, kadm.NewACLs().Deny(user).DenyHosts("*").Topics(topic).Groups(group).Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	cfg := map[string]any{"bootstrap_servers": []string{b.SASLBootstrap}, "sasl_mechanism": "PLAIN",
		"sasl_username": b.Limited, "sasl_password": b.LimitedPassword, "topics": []string{topic}, "consumer_group": group}
	where := fmt.Sprintf(`bootstrap_servers %s (SASL PLAIN user %q)`, b.SASLBootstrap, b.Limited)
	want := strings.Join([]string{
		fmt.Sprintf(`plugin_config.topics: user %q may not describe topic %q (TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics: [Topic authorization failed.]): grant the user DESCRIBE and READ on it (kafka-acls.sh), or use another user`, b.Limited, topic),
		fmt.Sprintf(`plugin_config.consumer_group: user %q may not use group %q on %s (GROUP_AUTHORIZATION_FAILED: Not authorized to access group: Group authorization failed.): grant the user READ and DESCRIBE on it (kafka-acls.sh --group %s), or use another group or user`, b.Limited, group, where, group),
	}, "\n")
	var got string
	// The broker applies new ACLs a moment after CreateACLs returns.
	testkit.WaitFor(t, "both refusals", func() bool {
		got = preflight(t, cfg)
		return strings.Count(got, "\n") == 1
	})
	if got != want {
		t.Errorf("refused rights:\n got %s\nwant %s", got, want)
	}
	delete(cfg, "topics")
	delete(cfg, "consumer_group")
	cfg["topic_pattern"] = regexp.QuoteMeta(topic)
	want = fmt.Sprintf(`plugin_config.topic_pattern: no topic user %q may read matches %q on %s: create one, or fix the pattern (the source would wait, reading nothing)`,
		b.Limited, regexp.QuoteMeta(topic), where)
	if got := preflight(t, cfg); got != want {
		t.Errorf("a pattern of a hidden topic:\n got %s\nwant %s", got, want)
	}
}
