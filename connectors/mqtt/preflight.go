package mqtt

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/ferryio/ferry/sdk"
)

var (
	_ sdk.Preflighter = (*Source)(nil)
	_ sdk.Preflighter = (*Sink)(nil)
)

// Preflight implements sdk.Preflighter (`ferry check --connect`): the broker answers, TLS
// and the login are accepted, and the broker grants a subscription to every filter of
// topics at its QoS (subscription_qos, else qos). The check connects under a client id of its own with a clean session, so
// a running source's persistent session is neither taken over nor changed; a shared
// subscription ($share/GROUP/FILTER) is checked on its FILTER, so the check never joins
// the group and takes none of its messages. The subscriptions end with the check.
func (s *Source) Preflight(ctx context.Context, raw []byte) []error {
	cfg, err := SourceConfig.Parse(raw)
	if err != nil {
		return []error{err}
	}
	client, err := cfg.preflightConnect(ctx)
	if err != nil {
		return []error{err}
	}
	defer client.Disconnect(0)
	filters := make(map[string]byte, len(cfg.Topics))
	for _, t := range cfg.Topics {
		f := unshared(t)
		filters[f] = max(filters[f], byte(cfg.qosOf(t)))
	}
	tok := client.SubscribeMultiple(filters, func(paho.Client, paho.Message) {})
	if err := waitToken(ctx, tok, cfg.ConnectTimeout+time.Second); err != nil {
		return []error{fmt.Errorf("plugin_config.%s: subscribe on %s: %w", FieldTopics, strings.Join(cfg.brokers(), ", "), err)}
	}
	st, ok := tok.(*paho.SubscribeToken)
	if !ok {
		return nil
	}
	res := st.Result()
	var errs []error
	for _, t := range cfg.Topics {
		code, ok := res[unshared(t)]
		switch {
		case !ok:
		case code == 0x80:
			errs = append(errs, fmt.Errorf("plugin_config.%s: the broker refused user %s a subscription to %q: allow the user to subscribe to it in the broker's access rules, or change %s",
				FieldTopics, cfg.user(), t, FieldTopics))
		case int(code) < cfg.qosOf(t):
			field := FieldQoS
			if _, own := cfg.subscriptionQoS[t]; own {
				field = UpstreamSubscriptionQoS
			}
			errs = append(errs, fmt.Errorf("plugin_config.%s: the broker granted QoS %d on %q, below %d: ask for %d there, or raise the broker's maximum QoS",
				field, code, t, cfg.qosOf(t), code))
		}
	}
	unsub := client.Unsubscribe(keys(filters)...)
	_ = waitToken(ctx, unsub, cfg.ConnectTimeout)
	return errs
}

// Preflight implements sdk.Preflighter (`ferry check --connect`): the broker answers and
// TLS and the login are accepted, under a client id of its own (a running sink is not
// disconnected). Nothing is published, so whether the broker lets the user publish on the
// topic is not checked: an MQTT 3.1.1 broker drops a refused publish without saying so.
func (s *Sink) Preflight(ctx context.Context, raw []byte) []error {
	cfg, err := SinkConfig.Parse(raw)
	if err != nil {
		return []error{err}
	}
	client, err := cfg.preflightConnect(ctx)
	if err != nil {
		return []error{err}
	}
	client.Disconnect(0)
	return nil
}

// preflightConnect connects once, with a clean session, as client_id + "-check" (or a
// random ferry-check-… id when client_id is not set: the default id holds the connector's
// key, which the check does not know). A broker that does not answer names the broker keys.
func (c *clientConfig) preflightConnect(ctx context.Context) (paho.Client, error) {
	id := c.ClientID + "-check"
	if c.ClientID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		id = "ferry-check-" + hex.EncodeToString(b[:])
	}
	log := slog.New(slog.DiscardHandler)
	o, err := c.options(id, log)
	if err != nil {
		return nil, err
	}
	o.SetCleanSession(true)
	o.SetAutoReconnect(false)
	one := *c
	one.ConnectAttempts = 1
	client := paho.NewClient(o)
	if _, err := one.connect(ctx, client, "mqtt", log); err != nil {
		var ve *tls.CertificateVerificationError
		var ua x509.UnknownAuthorityError
		var he x509.HostnameError
		switch {
		case errors.Is(err, sdk.ErrPermanent):
		case errors.As(err, &ve), errors.As(err, &ua), errors.As(err, &he):
			err = fmt.Errorf("plugin_config.%s: %w: name the CA that signed the broker's certificate (and %s when the certificate carries another name than the URL's host)",
				FieldTLSCAFile, err, FieldTLSServerName)
		default:
			key := FieldBroker
			if c.Broker == "" {
				key = FieldBrokers
			}
			err = fmt.Errorf("%w: check plugin_config.%s (and the TLS keys for ssl://, mqtts://, wss://)", err, key)
		}
		return nil, err
	}
	return client, nil
}

// user names the login for an error.
func (c *clientConfig) user() string {
	if c.Username == "" {
		return "(anonymous)"
	}
	return fmt.Sprintf("%q", c.Username)
}

// unshared is the filter of a shared subscription ($share/GROUP/FILTER), or f itself.
func unshared(f string) string {
	if rest, ok := strings.CutPrefix(f, "$share/"); ok {
		if _, filter, ok := strings.Cut(rest, "/"); ok {
			return filter
		}
	}
	return f
}

func keys(m map[string]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
