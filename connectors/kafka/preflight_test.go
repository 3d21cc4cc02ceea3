package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/ferryio/ferry/internal/kafkatest"
	"github.com/ferryio/ferry/internal/testkit"
)

// preflight runs the sink's Preflight on cfg: its errors one per line, "" for none.
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

// TestSinkPreflight: an existing topic and an offsets topic the brokers would create pass,
// and nothing is created; a missing fixed topic names topic and the fix; a templated topic
// is not looked up; an offsets topic that is not compacted or of an invalid name names
// offsets_topic.
func TestSinkPreflight(t *testing.T) {
	b := kafkatest.Connect(t)
	topic := b.Topic(t, 2)
	offsets := kafkatest.Name(t, "offsets")
	cfg := map[string]any{"bootstrap_servers": []string{b.Bootstrap}, "topic": topic, "offsets_topic": offsets}
	if got := preflight(t, cfg); got != "" {
		t.Fatalf("an existing topic: %s", got)
	}
	md, err := b.Admin.Metadata(context.Background(), offsets)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := md.Topics[offsets]; ok && d.Err == nil {
		t.Errorf("the check created the offsets topic %q", offsets)
	}
	missing := kafkatest.Name(t, "missing")
	cfg["topic"] = missing
	want := fmt.Sprintf("plugin_config.topic: the cluster at bootstrap_servers %s has no topic %q: create it (kafka-topics.sh --create --topic %s), the sink does not create topics",
		b.Bootstrap, missing, missing)
	if got := preflight(t, cfg); got != want {
		t.Errorf("a missing topic:\n got %s\nwant %s", got, want)
	}
	cfg["topic"] = missing + "-{topic}"
	if got := preflight(t, cfg); got != "" {
		t.Errorf("a templated topic: %s", got)
	}
	cfg["offsets_topic"] = topic // an existing topic, not compacted
	want = fmt.Sprintf(`plugin_config.offsets_topic: %q on bootstrap_servers %s has cleanup.policy=delete: its records, the sink's positions, expire after retention.ms; set cleanup.policy=compact on it (kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact)`,
		topic, b.Bootstrap, topic)
	if got := preflight(t, cfg); got != want {
		t.Errorf("an offsets topic that is not compacted:\n got %s\nwant %s", got, want)
	}
	compacted := kafkatest.Name(t, "compacted")
	if _, err := b.Admin.CreateTopic(context.Background(), 1, -1, map[string]*string{"cleanup.policy": new("compact")}, compacted); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = b.Admin.DeleteTopics(context.Background(), compacted) })
	cfg["offsets_topic"] = compacted
	if got := preflight(t, cfg); got != "" {
		t.Errorf("a compacted offsets topic: %s", got)
	}
	cfg["offsets_topic"] = "bad name!"
	want = `plugin_config.offsets_topic: "bad name!" is not a valid topic name (INVALID_TOPIC_EXCEPTION: The request attempted to perform an operation on an invalid topic.): use letters, digits, '.', '_' and '-', at most 249 of them`
	if got := preflight(t, cfg); got != want {
		t.Errorf("an invalid offsets topic:\n got %s\nwant %s", got, want)
	}
}

// TestSinkPreflightReach: nothing listening, a wrong SASL password and TLS without the CA
// each name the keys that fix them, never the password.
func TestSinkPreflightReach(t *testing.T) {
	b := kafkatest.Connect(t)
	got := preflight(t, map[string]any{"bootstrap_servers": []string{"127.0.0.1:1"}, "dial_timeout": "200ms"})
	want := "plugin_config.bootstrap_servers: no broker of bootstrap_servers 127.0.0.1:1 answers: "
	if !strings.HasPrefix(got, want) || !strings.Contains(got, "connection refused") ||
		!strings.HasSuffix(got, ": check the addresses, and tls_enabled and sasl_mechanism against the listener's protocol") {
		t.Errorf("nothing listening:\n got %s\nwant %s…connection refused…", got, want)
	}
	got = preflight(t, map[string]any{"bootstrap_servers": []string{b.SASLBootstrap}, "sasl_mechanism": "SCRAM-SHA-256",
		"sasl_username": b.User, "sasl_password": "not-" + b.Password})
	want = fmt.Sprintf(`plugin_config.sasl_username, sasl_password: no broker of bootstrap_servers %s (SASL SCRAM-SHA-256 user %q) answers: SASL_AUTHENTICATION_FAILED: SASL Authentication failed.: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256: fix the user or the password`,
		b.SASLBootstrap, b.User)
	if got != want || strings.Contains(got, "not-"+b.Password) {
		t.Errorf("a wrong password:\n got %s\nwant %s", got, want)
	}
	got = preflight(t, map[string]any{"bootstrap_servers": []string{b.TLSBootstrap}, "tls_enabled": true})
	want = fmt.Sprintf("plugin_config.tls_ca_file: no broker of bootstrap_servers %s answers: unable to dial: tls: failed to verify certificate: x509: certificate signed by unknown authority: name the CA that signed the brokers' certificates", b.TLSBootstrap)
	if got != want {
		t.Errorf("TLS without the CA:\n got %s\nwant %s", got, want)
	}
	if got := preflight(t, map[string]any{"bootstrap_servers": []string{b.TLSBootstrap}, "tls_ca_file": b.CAFile, "topic": "{topic}"}); got != "" {
		t.Errorf("TLS with the CA: %s", got)
	}
}

// TestSinkPreflightRefused: a user denied DESCRIBE on the topic, CREATE of the offsets
// topic and WRITE on the check's transactional ids gets one error for each, naming the
// key (or the rights) and the ACL that fixes it.
func TestSinkPreflightRefused(t *testing.T) {
	b := kafkatest.Connect(t)
	topic := b.Topic(t, 1)
	offsets := kafkatest.Name(t, "offsets")
	user := "User:" + b.Limited
	// A resource with an ACL is closed to everyone but what its ACLs allow: the offsets
	// topic denied CREATE stays open to DESCRIBE by an ALLOW.
	b.ACLs(t, kadm.NewACLs().Deny(user).DenyHosts("*").Topics(topic).Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	b.ACLs(t, kadm.NewACLs().Deny(user).DenyHosts("*").Topics(offsets).Clusters().Operations(kadm.OpCreate).ResourcePatternType(kadm.ACLPatternLiteral))
	b.ACLs(t, kadm.NewACLs().Allow(user).AllowHosts("*").Topics(offsets).Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	b.ACLs(t, kadm.NewACLs().Deny(user).DenyHosts("*").TransactionalIDs("ferry-check-").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed))
	cfg := map[string]any{"bootstrap_servers": []string{b.SASLBootstrap}, "sasl_mechanism": "SCRAM-SHA-512",
		"sasl_username": b.Limited, "sasl_password": b.LimitedPassword, "topic": topic, "offsets_topic": offsets}
	where := fmt.Sprintf(`bootstrap_servers %s (SASL SCRAM-SHA-512 user %q)`, b.SASLBootstrap, b.Limited)
	want := strings.Join([]string{
		fmt.Sprintf(`plugin_config.topic: user %q may not describe topic %q (TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics: [Topic authorization failed.]): grant the user DESCRIBE and WRITE on it (kafka-acls.sh), or use another user`, b.Limited, topic),
		fmt.Sprintf(`plugin_config.offsets_topic: %q does not exist on %s and user %q may not create it (TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics: [Topic authorization failed.]): create it by hand (compacted, one partition), or grant the user CREATE on it`, offsets, where, b.Limited),
		fmt.Sprintf(`user %q may not start a transactional producer on %s (unable to initialize a producer ID due to request failures: TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Transactional ID authorization failed.): grant the user WRITE and DESCRIBE on the transactional ids ferry-* (kafka-acls.sh --transactional-id ferry- --resource-pattern-type prefixed), or use another user`, b.Limited, where),
	}, "\n")
	var got string
	// The broker applies new ACLs a moment after CreateACLs returns.
	testkit.WaitFor(t, "the three refusals", func() bool {
		got = preflight(t, cfg)
		return strings.Count(got, "\n") == 2
	})
	if got != want {
		t.Errorf("refused rights:\n got %s\nwant %s", got, want)
	}
}
