package mqtt

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name of both the source and the sink: path = "builtin:mqtt".
const Name = "mqtt"

// plugin_config fields both the source and the sink take.
const (
	// FieldBroker: the broker's URL: tcp:// or mqtt:// (plain), ssl://, tls:// or
	// mqtts:// (TLS), ws:// or wss:// (WebSocket). Exactly one of broker and brokers.
	FieldBroker = "broker"
	// FieldBrokers: several broker URLs, tried in order (a cluster, a standby).
	FieldBrokers = "brokers"
	// FieldClientID: the MQTT client id. The source's persistent session is keyed by it:
	// keep it stable and unique (default ferry-source-<key>, ferry-sink-<key>).
	FieldClientID = "client_id"
	// FieldUsername, FieldPassword: the login; the password is never logged.
	FieldUsername = "username"
	FieldPassword = "password"
	// TLS: a CA bundle (PEM) to verify the broker with (default the system's), a client
	// certificate and its key (PEM, both or neither), the name the broker's certificate
	// must carry (default the URL's host), and no verification at all (tests only).
	FieldTLSCAFile     = "tls_ca_file"
	FieldTLSCertFile   = "tls_cert_file"
	FieldTLSKeyFile    = "tls_key_file"
	FieldTLSServerName = "tls_server_name"
	FieldTLSInsecure   = "tls_insecure_skip_verify"
	// FieldKeepAlive: the MQTT keep-alive; default 30s.
	FieldKeepAlive = "keep_alive"
	// FieldConnectTimeout: one connection attempt's bound; default 10s.
	FieldConnectTimeout = "connect_timeout"
	// FieldConnectAttempts: connection attempts at open before it fails (the runtime then
	// restarts the connector with its backoff); default 3.
	FieldConnectAttempts = "connect_attempts"
)

// clientConfig is what both connectors need to reach the broker.
type clientConfig struct {
	Broker          string
	Brokers         []string
	ClientID        string
	Username        string
	Password        sdk.Secret
	TLSCAFile       string
	TLSCertFile     string
	TLSKeyFile      string
	TLSServerName   string
	TLSInsecure     bool
	KeepAlive       time.Duration
	ConnectTimeout  time.Duration
	ConnectAttempts int
}

var brokerSchemes = []string{"tcp", "mqtt", "ssl", "tls", "mqtts", "ws", "wss"}

// declareClient declares the client's fields; it returns broker's (the source gives it
// upstream's name too).
func declareClient(c *clientConfig, f *sdk.Fields) *sdk.Field[string] {
	broker := f.URL(FieldBroker, &c.Broker, brokerSchemes...).Doc("the broker's URL (tcp://host:1883, ssl://host:8883, ws://…); or brokers")
	f.Strings(FieldBrokers, &c.Brokers).Doc("several broker URLs, tried in order").Check(func(bs []string) error {
		for _, b := range bs {
			if err := checkBrokerURL(b); err != nil {
				return err
			}
		}
		return nil
	})
	f.ExactlyOne(FieldBroker, FieldBrokers)
	f.String(FieldClientID, &c.ClientID).Doc("the MQTT client id (default ferry-source-<key> or ferry-sink-<key>); stable and unique per connector")
	f.String(FieldUsername, &c.Username).Doc("the login's user name")
	f.Secret(FieldPassword, &c.Password).Doc("the login's password; never logged")
	f.String(FieldTLSCAFile, &c.TLSCAFile).Doc("PEM CA bundle the broker's certificate is verified with (default the system's)")
	f.String(FieldTLSCertFile, &c.TLSCertFile).Doc("PEM client certificate (with tls_key_file)")
	f.String(FieldTLSKeyFile, &c.TLSKeyFile).Doc("PEM client key (with tls_cert_file)")
	f.BothOrNeither(FieldTLSCertFile, FieldTLSKeyFile)
	f.String(FieldTLSServerName, &c.TLSServerName).Doc("the name the broker's certificate must carry (default the URL's host)")
	f.Bool(FieldTLSInsecure, &c.TLSInsecure).Default(false).Doc("do not verify the broker's certificate (tests only)")
	f.Duration(FieldKeepAlive, &c.KeepAlive).Default(30 * time.Second).Min(time.Second).Doc("the MQTT keep-alive")
	f.Duration(FieldConnectTimeout, &c.ConnectTimeout).Default(10 * time.Second).Min(10 * time.Millisecond).Doc("one connection attempt's bound")
	f.Int(FieldConnectAttempts, &c.ConnectAttempts).Default(3).Min(1).Doc("connection attempts at open before it fails (the runtime restarts it later)")
	return broker
}

func checkBrokerURL(b string) error {
	u, err := url.Parse(b)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not a broker URL (want scheme://host:port)", b)
	}
	for _, s := range brokerSchemes {
		if u.Scheme == s {
			return nil
		}
	}
	return fmt.Errorf("%q: scheme %q is not one of %s", b, u.Scheme, strings.Join(brokerSchemes, ", "))
}

// brokers returns the configured broker URLs.
func (c *clientConfig) brokers() []string {
	if c.Broker != "" {
		return []string{c.Broker}
	}
	return c.Brokers
}

// usesTLS reports whether a broker URL's scheme is a TLS one.
func usesTLS(b string) bool {
	s, _, _ := strings.Cut(b, "://")
	return s == "ssl" || s == "tls" || s == "mqtts" || s == "wss"
}

// tlsConfig builds the TLS settings (nil when no broker uses TLS and no TLS key is set).
func (c *clientConfig) tlsConfig() (*tls.Config, error) {
	want := c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSServerName != "" || c.TLSInsecure
	for _, b := range c.brokers() {
		want = want || usesTLS(b)
	}
	if !want {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName, InsecureSkipVerify: c.TLSInsecure} //nolint:gosec // the user's explicit choice, documented as tests only
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("plugin_config.%s: %w", FieldTLSCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("plugin_config.%s: %s holds no PEM certificate", FieldTLSCAFile, c.TLSCAFile)
		}
		tc.RootCAs = pool
	}
	if c.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("plugin_config.%s/%s: %w", FieldTLSCertFile, FieldTLSKeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// options returns Paho's options for this config: automatic reconnection with a capped
// backoff, no connect retry inside Connect (open retries with sdk.Retry instead).
func (c *clientConfig) options(clientID string, log *slog.Logger) (*paho.ClientOptions, error) {
	o := paho.NewClientOptions()
	for _, b := range c.brokers() {
		o.AddBroker(b)
	}
	tc, err := c.tlsConfig()
	if err != nil {
		return nil, sdk.Permanent(err)
	}
	if tc != nil {
		o.SetTLSConfig(tc)
	}
	o.SetClientID(clientID)
	if c.Username != "" {
		o.SetUsername(c.Username)
	}
	if !c.Password.IsZero() {
		o.SetPassword(c.Password.Reveal())
	}
	o.SetProtocolVersion(4) // MQTT 3.1.1
	o.SetKeepAlive(c.KeepAlive)
	o.SetPingTimeout(min(c.KeepAlive, 10*time.Second))
	o.SetConnectTimeout(c.ConnectTimeout)
	o.SetWriteTimeout(c.ConnectTimeout)
	o.SetAutoReconnect(true)
	o.SetConnectRetry(false)
	o.SetMaxReconnectInterval(10 * time.Second)
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		log.Warn("mqtt connection lost; reconnecting", "error", err)
	})
	o.SetReconnectingHandler(func(_ paho.Client, _ *paho.ClientOptions) {
		log.Debug("mqtt reconnecting")
	})
	return o, nil
}

// connect connects client, each attempt bounded by connect_timeout, retried (connect_attempts
// in all) unless the broker refused the login or the client id, which no retry fixes.
// Errors name the connector, the brokers and the user.
func (c *clientConfig) connect(ctx context.Context, client paho.Client, what string, log *slog.Logger) (sessionPresent bool, err error) {
	where := strings.Join(c.brokers(), ", ")
	retry := sdk.Retry{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Attempts: c.ConnectAttempts, Jitter: 0.2,
		What: what + ": connect to " + where, Log: log}
	err = retry.Do(ctx, func(ctx context.Context, _ int) error {
		tok := client.Connect()
		if err := waitToken(ctx, tok, c.ConnectTimeout+time.Second); err != nil {
			return c.connectError(err)
		}
		if ct, ok := tok.(*paho.ConnectToken); ok {
			sessionPresent = ct.SessionPresent()
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("%s: connect to %s: %w", what, where, err)
	}
	return sessionPresent, nil
}

// connectError classifies a failed connection: a refused login or client id is permanent.
func (c *clientConfig) connectError(err error) error {
	switch {
	case errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword), errors.Is(err, packets.ErrorRefusedNotAuthorised):
		user := c.Username
		if user == "" {
			user = "(anonymous)"
		}
		return sdk.Permanent(fmt.Errorf("the broker refused the login of user %q (plugin_config.%s, %s): %w", user, FieldUsername, FieldPassword, err))
	case errors.Is(err, packets.ErrorRefusedIDRejected):
		return sdk.Permanent(fmt.Errorf("the broker rejected the client id (plugin_config.%s): %w", FieldClientID, err))
	case errors.Is(err, packets.ErrorRefusedBadProtocolVersion):
		return sdk.Permanent(fmt.Errorf("the broker does not speak MQTT 3.1.1: %w", err))
	}
	return err
}

// errTimeout is the error of a token that did not complete in time.
var errTimeout = errors.New("no answer from the broker in time")

// waitToken waits for tok, at most d (0: no bound but ctx).
func waitToken(ctx context.Context, tok paho.Token, d time.Duration) error {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-tok.Done():
		return tok.Error()
	case <-timer:
		return errTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
}
