// Package kclient is what the Kafka source and sink share: the plugin_config keys that reach
// a cluster (bootstrap_servers, SASL, TLS, client_id), the franz-go options they make, the
// first contact with the cluster and the reading of its errors. It imports sdk and franz-go
// only.
package kclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ferryio/ferry/sdk"
)

// Mechanism is a SASL mechanism, or none.
type Mechanism string

// The mechanisms, as Kafka names them.
const (
	MechanismNone   Mechanism = ""
	MechanismPlain  Mechanism = "PLAIN"
	MechanismSHA256 Mechanism = "SCRAM-SHA-256"
	MechanismSHA512 Mechanism = "SCRAM-SHA-512"
)

// Conn is how to reach the cluster.
type Conn struct {
	Bootstrap  []string
	Mechanism  Mechanism
	User       string
	Password   sdk.Secret
	TLS        bool
	TLSCAFile  string
	ClientID   string
	DialTimout time.Duration
}

// Declare declares the connection keys on f, bound to c.
func Declare(f *sdk.Fields, c *Conn) {
	f.Strings("bootstrap_servers", &c.Bootstrap).Required().NonEmpty().Check(checkHostPorts).
		Doc("the brokers to reach the cluster through, each host:port")
	sdk.Enum(f, "sasl_mechanism", &c.Mechanism, sdk.Choice(MechanismPlain, "plain"),
		sdk.Choice(MechanismSHA256, "scram-sha-256"), sdk.Choice(MechanismSHA512, "scram-sha-512")).
		Doc("SASL authentication (default none)")
	f.String("sasl_username", &c.User).Doc("the SASL user")
	f.Secret("sasl_password", &c.Password).Doc("the SASL user's password; never logged")
	f.RequiredWhen("sasl_username", "sasl_mechanism", string(MechanismPlain), string(MechanismSHA256), string(MechanismSHA512))
	f.RequiredWhen("sasl_password", "sasl_mechanism", string(MechanismPlain), string(MechanismSHA256), string(MechanismSHA512))
	f.Bool("tls_enabled", &c.TLS).Default(false).Doc("connect with TLS (the system's roots, or tls_ca_file)")
	f.String("tls_ca_file", &c.TLSCAFile).Doc("a PEM file of the CAs to trust instead of the system's (implies tls_enabled)")
	f.String("client_id", &c.ClientID).Default("ferry").NonEmpty().Doc("the client id the brokers see (quotas, logs)")
	f.Duration("dial_timeout", &c.DialTimout).Default(10 * time.Second).Min(100 * time.Millisecond).
		Doc("how long one connection to a broker may take")
}

func checkHostPorts(v []string) error {
	for _, hp := range v {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" {
			return fmt.Errorf("%q is not host:port", hp)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("%q: port %q is not a number from 1 to 65535", hp, port)
		}
	}
	return nil
}

// Options returns the franz-go options of c. The CA file is read here: a file that cannot
// be read or holds no certificate is an error naming tls_ca_file.
func (c *Conn) Options() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Bootstrap...), kgo.ClientID(c.ClientID), kgo.DialTimeout(c.DialTimout)}
	if c.TLS || c.TLSCAFile != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.TLSCAFile != "" {
			pem, err := os.ReadFile(c.TLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("plugin_config.tls_ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("plugin_config.tls_ca_file: %s holds no PEM certificate", c.TLSCAFile)
			}
			cfg.RootCAs = pool
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	switch c.Mechanism {
	case MechanismPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: c.User, Pass: c.Password.Reveal()}.AsMechanism()))
	case MechanismSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.User, Pass: c.Password.Reveal()}.AsSha256Mechanism()))
	case MechanismSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.User, Pass: c.Password.Reveal()}.AsSha512Mechanism()))
	}
	return opts, nil
}

// Where names the cluster in errors and logs: the bootstrap servers and, with SASL, the
// mechanism and user (never the password).
func (c *Conn) Where() string {
	w := "bootstrap_servers " + strings.Join(c.Bootstrap, ",")
	if c.Mechanism != MechanismNone {
		w += fmt.Sprintf(" (SASL %s user %q)", c.Mechanism, c.User)
	}
	return w
}

// Contact pings the cluster until a broker answers, with retry's backoff and attempts:
// a connector's Open calls it so that a wrong address or wrong credentials fail there,
// naming the cluster. Authentication failures are permanent (retrying cannot help); a
// broker that does not answer is retried, then returned as an error the runtime's restart
// policy retries.
func Contact(ctx context.Context, cl *kgo.Client, c *Conn, retry sdk.Retry) error {
	retry.What = "reach the Kafka cluster"
	return retry.Do(ctx, func(ctx context.Context, _ int) error {
		pctx, cancel := context.WithTimeout(ctx, c.DialTimout+5*time.Second)
		defer cancel()
		if err := cl.Ping(pctx); err != nil {
			return Classify(fmt.Errorf("no broker of %s answers: %w", c.Where(), err))
		}
		return nil
	})
}

// Classify marks err permanent when retrying cannot help: the brokers refused the
// credentials or the rights, or TLS failed on a certificate.
func Classify(err error) error {
	if err == nil || errors.Is(err, sdk.ErrPermanent) {
		return err
	}
	if Fatal(err) {
		return sdk.Permanent(err)
	}
	return err
}

// Fatal reports whether err is one no retry mends: wrong credentials, missing rights, a
// certificate the client does not trust.
func Fatal(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.SaslAuthenticationFailed, kerr.IllegalSaslState, kerr.UnsupportedSaslMechanism,
			kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.ClusterAuthorizationFailed,
			kerr.TransactionalIDAuthorizationFailed:
			return true
		}
	}
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	var ce x509.CertificateInvalidError
	return errors.As(err, &ue) || errors.As(err, &he) || errors.As(err, &ce)
}
