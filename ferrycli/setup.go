package ferrycli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/httpapi"
	"github.com/ferryio/ferry/connect/provider"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/server"
)

// Environment fallbacks of the flags shared by several commands.
const (
	envConfig     = "FERRY_CONFIG"
	envLogLevel   = "FERRY_LOG_LEVEL"
	envAddr       = "FERRY_ADDR"
	envUser       = "FERRY_USERNAME"
	envPassword   = "FERRY_PASSWORD"
	envToken      = "FERRY_TOKEN"
	envEmbedded   = "FERRY_EMBEDDED"
	envData       = "FERRY_DATA"
	envProgress   = "FERRY_PROGRESS"
	envPartitions = "FERRY_PARTITIONS"
)

// envString returns the value of env var name, or def when unset or empty.
func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envBool(name string, def bool) bool {
	if v, err := strconv.ParseBool(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := sdk.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func envUint(name string, def uint64) uint64 {
	if v, err := strconv.ParseUint(os.Getenv(name), 10, 32); err == nil {
		return v
	}
	return def
}

// parseLogLevel reads --log-level ("" = info).
func parseLogLevel(level string) (slog.Level, error) {
	var lv slog.Level
	if level != "" {
		if err := lv.UnmarshalText([]byte(level)); err != nil {
			return 0, fmt.Errorf("log level %q: want debug, info, warn or error", level)
		}
	}
	return lv, nil
}

// newLogger logs to w (stderr: stdout belongs to the stdout sink) in the config's format.
func newLogger(w io.Writer, format config.LogFormat, level string) (*slog.Logger, error) {
	lv, err := parseLogLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == config.LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// configStore is where connector configs come from: the local config_dir or the http
// provider. The runtime re-reads a connector's config from it at a restart and every
// config at a reload; the HTTP API's configs routes read and write it.
type configStore interface {
	httpapi.ConfigStore
	connect.ConfigSource
	connect.ConnectorScanner
}

// loadConfig reads the .env file (into the process environment), the runtime config and
// the connectors' configs: the files of config_dir (createDir: a missing config_dir is
// created (run), else it is an error (check must not change anything)), or the active
// configs of the http provider, whose request retries logFor's logger reports. ctx bounds
// the provider's requests.
func loadConfig(ctx context.Context, path string, createDir bool, logFor func(*config.Runtime) (*slog.Logger, error)) (*startPlan, error) {
	dot, err := config.LoadDotEnv(os.Environ())
	if err != nil {
		return nil, err
	}
	if err := dot.Apply(); err != nil {
		return nil, err
	}
	rc, err := config.ParseRuntime(path)
	if err != nil {
		return nil, err
	}
	if dot.Path != "" {
		rc.Warnings = append(rc.Warnings, fmt.Sprintf("loaded %d variable(s) from %s", len(dot.Vars), dot.Path))
	}
	log, err := logFor(rc)
	if err != nil {
		return nil, err
	}
	plan := &startPlan{rc: rc, log: log}
	if rc.Connectors.ConfigType == config.ProviderHTTP {
		p, err := provider.NewHTTP(rc.Connectors, provider.HTTPOptions{Logger: log.With("component", "config_provider"), PluginDirs: rc.PluginDirs()})
		if err != nil {
			return nil, err
		}
		log.Info("reading the connectors' configs", "provider", p.String())
		if plan.conns, err = p.Load(ctx); err != nil {
			p.Close()
			return nil, fmt.Errorf("connectors: read the active configs: %w", err)
		}
		plan.store, plan.closeStore = p, p.Close
		return plan, nil
	}
	if createDir {
		if err := config.EnsureConfigDir(rc.Connectors.ConfigDir); err != nil {
			return nil, err
		}
	}
	if plan.conns, err = config.LoadConnectors(rc.Connectors.ConfigDir, os.Environ()); err != nil {
		return nil, err
	}
	plan.store = &provider.Local{Dir: rc.Connectors.ConfigDir, Env: os.Environ(), PluginDirs: rc.PluginDirs()}
	plan.closeStore = func() {}
	return plan, nil
}

// configSource names where the connectors' configs come from, for logs and check.
func configSource(rc *config.Runtime) string {
	if rc.Connectors.ConfigType == config.ProviderHTTP {
		return "config provider " + config.RedactURL(rc.Connectors.BaseURL)
	}
	return "config_dir " + rc.Connectors.ConfigDir
}

// clientOptions turns the [iggy] section into client options: a token (personal access
// token) wins over username/password, as upstream; TLS needs ca_file.
func clientOptions(c config.Iggy, log *slog.Logger) ([]iggy.Opt, error) {
	opts := []iggy.Opt{iggy.WithLogger(log)}
	tok, err := c.ResolveToken()
	if err != nil {
		return nil, err
	}
	if tok != "" {
		opts = append(opts, iggy.WithToken(tok))
	} else {
		if c.Username == "" || c.Password.Reveal() == "" {
			return nil, errors.New("iggy: username and password (or a token) are required")
		}
		opts = append(opts, iggy.WithCredentials(c.Username, c.Password.Reveal()))
	}
	if c.TLS.Enabled {
		pem, err := os.ReadFile(c.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("iggy.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("iggy.tls.ca_file %s: no PEM certificate found", c.TLS.CAFile)
		}
		// No domain: the client checks each host it dials (a seed, or the leader).
		tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: c.TLS.Domain}
		opts = append(opts, iggy.WithTLS(tc))
	}
	return opts, nil
}

// applyEmbeddedLimits copies the [embedded] connection limits and disk reserve into cfg
// (0 or "" keeps the server's default; disk_reserve "0" turns the reserve off).
func applyEmbeddedLimits(e config.Embedded, cfg *server.Config) error {
	if e.MaxConnections < 0 || e.MaxConnectionsPerIP < 0 {
		return errors.New("embedded.max_connections and embedded.max_connections_per_ip must not be negative")
	}
	cfg.MaxConnections, cfg.MaxConnectionsPerIP = e.MaxConnections, e.MaxConnectionsPerIP
	if e.DiskReserve != "" {
		v, err := parseDiskReserve(e.DiskReserve)
		if err != nil {
			return fmt.Errorf("embedded.disk_reserve: %w", err)
		}
		cfg.DiskReserve = v
	}
	for _, d := range []struct {
		key, text string
		dst       *time.Duration
	}{
		{"embedded.login_timeout", e.LoginTimeout, &cfg.LoginTimeout},
		{"embedded.frame_read_timeout", e.FrameReadTimeout, &cfg.FrameReadTimeout},
	} {
		if d.text == "" {
			continue
		}
		v, err := sdk.ParseDuration(d.text)
		if err != nil || v <= 0 {
			return fmt.Errorf("%s %q: want a positive duration such as \"10s\"", d.key, d.text)
		}
		*d.dst = v
	}
	return nil
}

// ensureTopics creates the streams and topics the enabled connectors name when missing
// (--create-topics, --embedded), each new topic with partitions partitions, and logs each
// creation at INFO with that count: the connectors themselves create nothing.
func ensureTopics(ctx context.Context, c *iggy.Client, conns *config.Connectors, partitions uint32, log *slog.Logger) error {
	type st struct{ s, t string }
	var want []st
	for _, src := range conns.Sources {
		if src.Enabled && len(src.Streams) > 0 {
			last := src.Streams[len(src.Streams)-1]
			want = append(want, st{last.Stream, last.Topic})
		}
		if dl, ok := config.DeadLetterTopic(src.OnFailure, src.DeadLetter); src.Enabled && ok {
			want = append(want, st{dl.Stream, dl.Topic})
		}
	}
	for _, snk := range conns.Sinks {
		if !snk.Enabled {
			continue
		}
		for _, s := range snk.Streams {
			for _, t := range s.Topics {
				want = append(want, st{s.Stream, t})
			}
		}
		if dl, ok := config.DeadLetterTopic(snk.OnFailure, snk.DeadLetter); ok {
			want = append(want, st{dl.Stream, dl.Topic})
		}
	}
	for _, w := range want {
		made, err := c.EnsureTopicCreated(ctx, w.s, w.t, partitions)
		if err != nil {
			return err
		}
		switch {
		case made.Stream && made.Topic:
			log.Info("created stream and topic (--create-topics)", "stream", w.s, "topic", w.t, "partitions", partitions)
		case made.Topic:
			log.Info("created topic (--create-topics)", "stream", w.s, "topic", w.t, "partitions", partitions)
		case made.Stream: // a concurrent creator made the topic first
			log.Info("created stream (--create-topics)", "stream", w.s)
		}
	}
	return nil
}

// absDir returns dir made absolute (for messages).
func absDir(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}

// displayConfig says whether the effective config is logged at start: yes unless
// IGGY_DISPLAY_CONFIG is set to something other than 1 or true (any case), as upstream.
func displayConfig() bool {
	v, ok := os.LookupEnv("IGGY_DISPLAY_CONFIG")
	return !ok || strings.EqualFold(v, "1") || strings.EqualFold(v, "true")
}

// parseDiskReserve reads a disk reserve size ("64MiB", "512 KiB", "1GB", "0") into
// server.Config.DiskReserve: bytes, with 0 turning the reserve off (the server's -1).
func parseDiskReserve(text string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(text))
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	units := map[string]float64{"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "kb": 1e3, "m": 1 << 20, "mib": 1 << 20, "mb": 1e6, "g": 1 << 30, "gib": 1 << 30, "gb": 1e9}
	mult, okUnit := units[unit]
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || !okUnit || n < 0 || n*mult > 1<<50 {
		return 0, fmt.Errorf("%q: want a size such as \"64MiB\", \"512KiB\" or \"0\" (no reserve)", text)
	}
	if v := int64(n * mult); v > 0 {
		return v, nil
	}
	return -1, nil
}
