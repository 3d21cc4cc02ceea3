package iggy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	iggyclient "github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:iggy".
const Name = "iggy"

// partitioning says which local partition a remote message goes to.
type partitioning string

const (
	// partitionSame: remote partition n → local partition n (the local topic needs at
	// least as many partitions).
	partitionSame partitioning = "same"
	// partitionKey: the remote partition's number is the partition key (a remote
	// partition keeps its order in one local partition, whatever the counts).
	partitionKey partitioning = "key"
	// partitionBalanced: the runtime's round robin per batch (at least once).
	partitionBalanced partitioning = "balanced"
)

// config is the source's plugin_config. The connection keys are named as the runtime's
// own [iggy] section (address, username, password, token; its [iggy.tls] as tls_*).
type config struct {
	Address      string
	Addresses    []string
	Username     string
	Password     sdk.Secret
	Token        sdk.Secret
	TLSEnabled   bool
	TLSCAFile    string
	TLSDomain    string
	Stream       string
	Topic        string
	Group        string
	Partitioning partitioning
	BatchSize    int
	InFlight     int
}

// Config declares plugin_config.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	f.String("address", &c.Address).Doc(`the remote Iggy server, "host:port" (a cluster: addresses)`)
	f.Strings("addresses", &c.Addresses).Doc("the remote cluster's seed addresses, tried in order")
	f.ExactlyOne("address", "addresses")
	f.String("username", &c.Username).Default("iggy").Doc("the remote user (with password)")
	f.Secret("password", &c.Password).Default(sdk.NewSecret("iggy")).Doc("the remote user's password")
	f.Secret("token", &c.Token).Doc(`a personal access token of the remote, or "file:<path>"; wins over username/password`)
	f.Bool("tls_enabled", &c.TLSEnabled).Default(false).Doc("connect to the remote over TLS")
	f.String("tls_ca_file", &c.TLSCAFile).Doc("the PEM CA the remote's certificate is checked against")
	f.String("tls_domain", &c.TLSDomain).Doc("the name the remote's certificate must carry (default: the host dialled)")
	f.RequiredWhen("tls_ca_file", "tls_enabled", "true")
	f.String("stream", &c.Stream).Required().NonEmpty().Doc("the remote stream")
	f.String("topic", &c.Topic).Required().NonEmpty().Doc("the remote topic replicated")
	f.String("consumer_group", &c.Group).Doc("the remote consumer group (default ferry-replicate-<key>)")
	sdk.Enum(f, "partitioning", &c.Partitioning, sdk.Choice(partitionSame), sdk.Choice(partitionKey), sdk.Choice(partitionBalanced)).
		Default(partitionSame).Doc("same: remote partition n to local n; key: by the remote partition; balanced: round robin (at least once)")
	f.Int("batch_size", &c.BatchSize).Default(1000).Min(1).Max(100_000).Doc("the most messages polled from the remote at once")
	f.Int("max_unacked", &c.InFlight).Default(8).Min(1).Max(64).Doc("the most batches read and not yet acknowledged (the file's max_in_flight chooses up to it)")
})

// Spec is the registry's description of plugin_config.
var Spec = Config.Spec()

// group is the remote consumer group's name.
func (c *config) group(key string) string {
	if c.Group != "" {
		return c.Group
	}
	return "ferry-replicate-" + key
}

// address is what iggy.Dial takes: one address, or the seeds separated by commas.
func (c *config) address() string {
	if c.Address != "" {
		return c.Address
	}
	return strings.Join(c.Addresses, ", ")
}

// window is how many of each local partition's last messages the read-back must see to
// find every remote message appended but not acknowledged: one with a remote partition
// per local partition, else the batches that may be in flight.
func (c *config) window() int {
	if c.Partitioning == partitionSame {
		return 1
	}
	return c.BatchSize * c.InFlight
}

// dialOptions turns the connection keys into client options: a token (read from its file
// for "file:<path>") wins over username and password; TLS checks the remote against the
// CA file.
func (c *config) dialOptions(log *slog.Logger) ([]iggyclient.Opt, string, error) {
	opts := []iggyclient.Opt{iggyclient.WithLogger(log)}
	who := "user " + c.Username
	tok := c.Token.Reveal()
	if p, ok := strings.CutPrefix(tok, "file:"); ok {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, "", sdk.FieldErr("token", "read the token file: %v", err)
		}
		tok = strings.TrimSpace(string(b))
		if tok == "" {
			return nil, "", sdk.FieldErr("token", "the token file %s is empty", p)
		}
	}
	if tok != "" {
		opts, who = append(opts, iggyclient.WithToken(tok)), "a personal access token"
	} else {
		if c.Username == "" || c.Password.IsZero() {
			return nil, "", errors.New("plugin_config: username and password (or token) are required")
		}
		opts = append(opts, iggyclient.WithCredentials(c.Username, c.Password.Reveal()))
	}
	if c.TLSEnabled {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, "", sdk.FieldErr("tls_ca_file", "%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, "", sdk.FieldErr("tls_ca_file", "%s holds no PEM certificate", c.TLSCAFile)
		}
		opts = append(opts, iggyclient.WithTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: c.TLSDomain}))
	}
	return opts, who, nil
}

// where names the remote topic for errors and logs.
func (c *config) where() string {
	return fmt.Sprintf("remote %s/%s at %s", c.Stream, c.Topic, c.address())
}
