package kclient

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Reach is a `ferry check --connect` check's first contact: one ping, its failure worded
// with the keys that fix it (the SASL keys for refused credentials, the TLS keys for a
// certificate, bootstrap_servers otherwise). The client is the caller's to close.
func Reach(ctx context.Context, c *Conn, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := c.Options()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, c.DialTimout+5*time.Second)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return nil, c.explain(fmt.Errorf("no broker of %s answers: %w", c.Where(), err))
	}
	return cl, nil
}

// explain adds the fix to an error reaching the cluster.
func (c *Conn) explain(err error) error {
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	var ce x509.CertificateInvalidError
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState):
		return fmt.Errorf("plugin_config.sasl_username, sasl_password: %w: fix the user or the password", err)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("plugin_config.sasl_mechanism: %w: use one the listener enables", err)
	case errors.As(err, &ue), errors.As(err, &he), errors.As(err, &ce):
		return fmt.Errorf("plugin_config.tls_ca_file: %w: name the CA that signed the brokers' certificates", err)
	}
	return fmt.Errorf("plugin_config.bootstrap_servers: %w: check the addresses, and tls_enabled and sasl_mechanism against the listener's protocol", err)
}

// Topics looks up names and returns those the cluster does not have; a topic the user
// may not describe is an error naming field.
func (c *Conn) Topics(ctx context.Context, adm *kadm.Client, field string, names ...string) (missing []string, err error) {
	md, err := adm.Metadata(ctx, names...)
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		return nil, c.mayNotDescribe(field, names, err)
	}
	if err != nil {
		return nil, c.explain(fmt.Errorf("read the metadata of %q from %s: %w", names, c.Where(), err))
	}
	for _, t := range names {
		d, ok := md.Topics[t]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			missing = append(missing, t)
		case errors.Is(d.Err, kerr.TopicAuthorizationFailed):
			return nil, c.mayNotDescribe(field, []string{t}, d.Err)
		case errors.Is(d.Err, kerr.InvalidTopicException):
			return nil, fmt.Errorf("plugin_config.%s: %q is not a valid topic name (%w): use letters, digits, '.', '_' and '-', at most 249 of them",
				field, t, d.Err)
		case d.Err != nil:
			return nil, fmt.Errorf("plugin_config.%s: topic %q on %s: %w", field, t, c.Where(), d.Err)
		}
	}
	return missing, nil
}

func (c *Conn) mayNotDescribe(field string, topics []string, err error) error {
	q := make([]string, len(topics))
	for i, t := range topics {
		q[i] = fmt.Sprintf("%q", t)
	}
	what := "topic " + q[0]
	if len(q) > 1 {
		what = "topics " + strings.Join(q, ", ")
	}
	return fmt.Errorf("plugin_config.%s: %s may not describe %s (%w): grant the user DESCRIBE and %s on it (kafka-acls.sh), or use another user",
		field, c.Who(), what, err, rightOf(field))
}

func rightOf(field string) string {
	if field == "topics" || field == "topic_pattern" {
		return "READ"
	}
	return "WRITE"
}

// Matching returns the cluster's topics whose whole name matches pattern, sorted.
func (c *Conn) Matching(ctx context.Context, adm *kadm.Client, pattern string) ([]string, error) {
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	if err != nil {
		return nil, fmt.Errorf("plugin_config.topic_pattern: %w", err)
	}
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, c.explain(fmt.Errorf("list the topics of %s: %w", c.Where(), err))
	}
	var out []string
	for _, t := range all.Names() {
		if re.MatchString(t) {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Who names the client for an error: the SASL user, or the listener's anonymous one.
func (c *Conn) Who() string {
	if c.Mechanism == MechanismNone {
		return "the anonymous user"
	}
	return fmt.Sprintf("user %q", c.User)
}
