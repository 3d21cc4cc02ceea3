package config

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/ferryio/ferry/sdk"
)

// DefaultRuntimeConfigPath is where the runtime config is looked for when neither a path nor
// IGGY_CONNECTORS_CONFIG_PATH is given (relative: searched in the working directory and its
// parents, as upstream).
const DefaultRuntimeConfigPath = "core/connectors/runtime/config.toml"

// Runtime is the runtime `config.toml`. Build it with [ParseRuntime] or [DefaultRuntime].
type Runtime struct {
	HTTP       HTTP      `toml:"http"`
	Iggy       Iggy      `toml:"iggy"`
	State      State     `toml:"state"`
	Connectors Provider  `toml:"connectors"`
	Logging    Logging   `toml:"logging"`
	Telemetry  Telemetry `toml:"telemetry"`
	// Embedded is a Ferry addition: the embedded Iggy-compatible server of `ferry run --embedded`.
	Embedded Embedded `toml:"embedded"`
	// Plugins is a Ferry addition: where native plugins may be loaded from.
	Plugins Plugins `toml:"plugins"`

	// Path is the file the config was read from ("" when only defaults and environment).
	Path string `toml:"-"`
	// Warnings lists what was ignored (missing file, unknown IGGY_CONNECTORS_* variables).
	Warnings []string `toml:"-"`
}

// HTTP is the [http] section: the runtime's HTTP API.
type HTTP struct {
	Enabled bool    `toml:"enabled"` // default true
	Address string  `toml:"address"` // default "127.0.0.1:8081"
	APIKey  Secret  `toml:"api_key"` // "" = no key required
	CORS    CORS    `toml:"cors"`    // default disabled
	Metrics Metrics `toml:"metrics"` // default disabled, "/metrics"
	TLS     HTTPTLS `toml:"tls"`     // default disabled
}

// CORS is [http.cors].
type CORS struct {
	Enabled             bool     `toml:"enabled"`
	AllowedMethods      []string `toml:"allowed_methods"` // default GET, POST, PUT, DELETE
	AllowedOrigins      []string `toml:"allowed_origins"` // default ["*"]
	AllowedHeaders      []string `toml:"allowed_headers"` // default ["content-type"]
	ExposedHeaders      []string `toml:"exposed_headers"` // default [""]
	AllowCredentials    bool     `toml:"allow_credentials"`
	AllowPrivateNetwork bool     `toml:"allow_private_network"`
}

// Metrics is [http.metrics].
type Metrics struct {
	Enabled  bool   `toml:"enabled"`
	Endpoint string `toml:"endpoint"`
}

// HTTPTLS is [http.tls].
type HTTPTLS struct {
	Enabled  bool   `toml:"enabled"`
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
}

// Iggy is the [iggy] section: how to reach the Iggy server.
type Iggy struct {
	Address  string  `toml:"address"`  // default "localhost:8090"; or seeds "a:8090, b:8090" (tried in order)
	Username string  `toml:"username"` // default "iggy"
	Password Secret  `toml:"password"` // default "iggy"
	Token    Secret  `toml:"token"`    // personal access token, or "file:<path>"; wins when set
	TLS      IggyTLS `toml:"tls"`
	// DefaultPassword is true when password was set by neither the file nor the
	// environment (so it is the built-in "iggy"). The embedded server must not treat
	// such a password as chosen: it refuses it off loopback.
	DefaultPassword bool `toml:"-"`
}

// IggyTLS is [iggy.tls].
type IggyTLS struct {
	Enabled bool   `toml:"enabled"`
	CAFile  string `toml:"ca_file"` // required when enabled
	Domain  string `toml:"domain"`  // "" = unset
}

// State is the [state] section.
type State struct {
	Path string `toml:"path"` // directory of source state files, default "local_state"
}

// ProviderType selects where connector configs come from.
type ProviderType string

// Provider types.
const (
	ProviderLocal ProviderType = "local"
	ProviderHTTP  ProviderType = "http" // a remote HTTP API (connect/provider.HTTP)
)

// Provider is the [connectors] section.
type Provider struct {
	ConfigType ProviderType `toml:"config_type"` // default local
	ConfigDir  string       `toml:"config_dir"`  // local: required

	// The http provider's fields.
	BaseURL string        `toml:"base_url"` // http: required, an absolute http or https URL
	Timeout time.Duration `toml:"timeout"`  // per request, default 10s
	// RequestHeaders are sent with every request (an API key, typically); their values
	// are secrets.
	RequestHeaders map[string]Secret `toml:"request_headers"`
	// URLTemplates override the path of an operation (keys: [ProviderOperations]).
	URLTemplates map[string]string `toml:"url_templates"`
	Response     ProviderResponse  `toml:"response"`
	Retry        ProviderRetry     `toml:"retry"`
}

// ProviderResponse is [connectors.response].
type ProviderResponse struct {
	DataPath  string `toml:"data_path"`
	ErrorPath string `toml:"error_path"`
}

// ProviderRetry is [connectors.retry].
type ProviderRetry struct {
	Enabled           bool          `toml:"enabled"`            // default true
	MaxAttempts       uint32        `toml:"max_attempts"`       // default 3
	InitialBackoff    time.Duration `toml:"initial_backoff"`    // default 1s
	MaxBackoff        time.Duration `toml:"max_backoff"`        // default 30s
	BackoffMultiplier uint32        `toml:"backoff_multiplier"` // default 2
}

// LogFormat is the stdout log format.
type LogFormat string

// Log formats.
const (
	LogText LogFormat = "text"
	LogJSON LogFormat = "json"
)

// Logging is the [logging] section.
type Logging struct {
	Format LogFormat `toml:"format"` // default text
}

// Telemetry is the [telemetry] section: OpenTelemetry export over OTLP (docs/telemetry.md).
// With enabled, logs and traces are exported as upstream; metrics only when
// [telemetry.metrics] enabled is set too (Ferry's addition; Prometheus stays on).
type Telemetry struct {
	Enabled     bool         `toml:"enabled"`
	ServiceName string       `toml:"service_name"`
	Logs        OTLPExporter `toml:"logs"`
	Traces      OTLPExporter `toml:"traces"`
	Metrics     OTLPMetrics  `toml:"metrics"`
}

// OTLPExporter is [telemetry.logs] or [telemetry.traces].
type OTLPExporter struct {
	Transport string `toml:"transport"` // grpc (default) or http
	// Endpoint is the receiver's URL: http://host:4317 for grpc; for http the URL of
	// the signal (http://host:4318/v1/traces), or of the receiver, to which the
	// signal's path is added.
	Endpoint string `toml:"endpoint"`
}

// OTLPMetrics is Ferry's [telemetry.metrics]: the Prometheus metrics, pushed over OTLP
// every interval.
type OTLPMetrics struct {
	Enabled   bool   `toml:"enabled"`   // default false
	Transport string `toml:"transport"` // grpc (default) or http
	Endpoint  string `toml:"endpoint"`  // as OTLPExporter.Endpoint
	Interval  string `toml:"interval"`  // default "60s"
}

// MetricsInterval is [telemetry.metrics] interval as a duration (validated by Validate).
func (m OTLPMetrics) MetricsInterval() time.Duration {
	d, err := sdk.ParseDuration(m.Interval)
	if err != nil {
		return 0
	}
	return d
}

// Embedded is the Ferry-only [embedded] section.
type Embedded struct {
	Enabled bool   `toml:"enabled"`  // default false; `ferry run --embedded` turns it on
	Address string `toml:"address"`  // listen address; "" = iggy.address
	DataDir string `toml:"data_dir"` // default "ferry_data"
	// Connection limits of the embedded server; 0 or "" = the server's default.
	MaxConnections      int    `toml:"max_connections"`        // total
	MaxConnectionsPerIP int    `toml:"max_connections_per_ip"` // per client IP address
	LoginTimeout        string `toml:"login_timeout"`          // a new connection's time to log in, e.g. "10s"
	FrameReadTimeout    string `toml:"frame_read_timeout"`     // time to finish a started frame, e.g. "30s"
	DiskReserve         string `toml:"disk_reserve"`           // space kept for a full disk, e.g. "64MiB"; "0" = none
}

// DefaultRuntime returns the defaults of upstream's embedded config.toml (and Ferry's).
func DefaultRuntime() *Runtime {
	r := &Runtime{}
	if err := r.fromRaw(defaultRawRuntime(), &locator{}); err != nil {
		panic(err) // defaults are constants
	}
	r.Iggy.DefaultPassword = true
	return r
}

// rawRuntime is the decode target: Runtime with durations as text.
type rawRuntime struct {
	HTTP       HTTP        `toml:"http"`
	Iggy       Iggy        `toml:"iggy"`
	State      State       `toml:"state"`
	Connectors rawProvider `toml:"connectors"`
	Logging    Logging     `toml:"logging"`
	Telemetry  Telemetry   `toml:"telemetry"`
	Embedded   Embedded    `toml:"embedded"`
	Plugins    Plugins     `toml:"plugins"`
}

type rawProvider struct {
	ConfigType     ProviderType      `toml:"config_type"`
	ConfigDir      string            `toml:"config_dir"`
	BaseURL        string            `toml:"base_url,omitempty"`
	Timeout        string            `toml:"timeout"`
	RequestHeaders map[string]Secret `toml:"request_headers,omitempty"`
	URLTemplates   map[string]string `toml:"url_templates,omitempty"`
	Response       ProviderResponse  `toml:"response"`
	Retry          rawProviderRetry  `toml:"retry"`
}

type rawProviderRetry struct {
	Enabled           bool   `toml:"enabled"`
	MaxAttempts       uint32 `toml:"max_attempts"`
	InitialBackoff    string `toml:"initial_backoff"`
	MaxBackoff        string `toml:"max_backoff"`
	BackoffMultiplier uint32 `toml:"backoff_multiplier"`
}

func defaultRawRuntime() rawRuntime {
	return rawRuntime{
		HTTP: HTTP{
			Enabled: true,
			Address: "127.0.0.1:8081",
			CORS: CORS{
				AllowedMethods: []string{"GET", "POST", "PUT", "DELETE"},
				AllowedOrigins: []string{"*"},
				AllowedHeaders: []string{"content-type"},
				ExposedHeaders: []string{""},
			},
			Metrics: Metrics{Endpoint: "/metrics"},
			TLS:     HTTPTLS{CertFile: "core/certs/iggy_cert.pem", KeyFile: "core/certs/iggy_key.pem"},
		},
		Iggy: Iggy{
			Address:  "localhost:8090",
			Username: "iggy",
			Password: "iggy",
			TLS:      IggyTLS{CAFile: "core/certs/iggy_ca_cert.pem"},
		},
		State:      State{Path: "local_state"},
		Connectors: rawProvider{ConfigType: ProviderLocal, Timeout: "10s", Retry: rawProviderRetry{Enabled: true, MaxAttempts: 3, InitialBackoff: "1s", MaxBackoff: "30s", BackoffMultiplier: 2}},
		Logging:    Logging{Format: LogText},
		Telemetry: Telemetry{
			ServiceName: "iggy-connectors",
			Logs:        OTLPExporter{Transport: "grpc", Endpoint: "http://localhost:4317"},
			Traces:      OTLPExporter{Transport: "grpc", Endpoint: "http://localhost:4317"},
			Metrics:     OTLPMetrics{Transport: "grpc", Endpoint: "http://localhost:4317", Interval: "60s"},
		},
		Embedded: Embedded{DataDir: "ferry_data"},
	}
}

// ParseRuntime reads the runtime config with the process environment; see [ParseRuntimeEnv].
func ParseRuntime(path string) (*Runtime, error) { return ParseRuntimeEnv(path, os.Environ()) }

// ParseRuntimeEnv reads the runtime config at path, layered as upstream: defaults, then the
// file (tables merged key by key, arrays replaced whole), then IGGY_CONNECTORS_* variables of
// env ("K=V" entries). An empty path means IGGY_CONNECTORS_CONFIG_PATH, else
// [DefaultRuntimeConfigPath]; a relative one is then searched in the working directory and
// its parents. A missing default file only adds a warning; a path given explicitly or by
// IGGY_CONNECTORS_CONFIG_PATH must exist.
// The result is validated; errors are *Error values and never contain secrets.
func ParseRuntimeEnv(path string, env []string) (*Runtime, error) {
	em := envMap(env)
	raw := defaultRawRuntime()
	loc := &locator{env: map[string]string{}}
	var warnings []string
	explicit := path != ""
	if !explicit {
		fromEnv := em[EnvPrefix+"CONFIG_PATH"]
		path = fromEnv
		if path == "" {
			path = DefaultRuntimeConfigPath
		}
		if found, ok := searchUp(path); ok {
			path = found
		} else if fromEnv != "" {
			// Upstream only warns and runs on defaults: a typo in the variable would then
			// run a different pipeline than the one configured.
			return nil, &Error{File: fromEnv, Env: EnvPrefix + "CONFIG_PATH", Msg: "runtime config not found (searched the working directory and its parents)"}
		} else {
			warnings = append(warnings, fmt.Sprintf("runtime config %s not found; using defaults", path))
			path = ""
		}
	}
	if path != "" {
		loc.file = path
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, &Error{File: path, Msg: "cannot read runtime config", Err: err}
		}
		if loc.idx, err = indexDocument(data); err != nil {
			return nil, tomlError(path, &docIndex{}, err)
		}
		if err := decodeStrict(data, &raw); err != nil {
			return nil, tomlError(path, loc.idx, err)
		}
	}
	w, err := applyRuntimeEnv(&raw, em, loc)
	if err != nil {
		return nil, err
	}
	r := &Runtime{Path: path, Warnings: append(warnings, w...)}
	if err := r.fromRaw(raw, loc); err != nil {
		return nil, err
	}
	_, pwFromEnv := loc.env["iggy.password"]
	pwInFile := loc.idx != nil && loc.idx.has("iggy.password")
	r.Iggy.DefaultPassword = !pwFromEnv && !pwInFile
	if err := r.validate(loc); err != nil {
		if path == "" {
			// Defaults alone never make a valid config (config_dir has none): say why no
			// file was read rather than blame a file that does not exist.
			return nil, fmt.Errorf("no runtime config: %s not found in the working directory or its parents (give its path with --config or IGGY_CONNECTORS_CONFIG_PATH): %w", DefaultRuntimeConfigPath, err)
		}
		return nil, err
	}
	return r, nil
}

func decodeStrict(data []byte, v any) error {
	return toml.NewDecoder(strings.NewReader(string(data))).DisallowUnknownFields().Decode(v)
}

// searchUp finds a relative path in the working directory or one of its parents.
func searchUp(path string) (string, bool) {
	if filepath.IsAbs(path) {
		_, err := os.Stat(path)
		return path, err == nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		p := filepath.Join(dir, path)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

var runtimeSecrets = map[string]bool{"iggy.password": true, "iggy.token": true, "http.api_key": true}

func applyRuntimeEnv(raw *rawRuntime, em map[string]string, loc *locator) ([]string, error) {
	fields := map[string]envField{}
	for _, f := range envFields(reflect.TypeOf(*raw)) {
		fields[EnvPrefix+f.name] = f
	}
	var warnings []string
	for _, name := range sortedKeys(em) {
		val := em[name]
		if !strings.HasPrefix(name, EnvPrefix) || val == "" {
			continue
		}
		rest := strings.TrimPrefix(name, EnvPrefix)
		if rest == "CONFIG_PATH" || rest == "ENV_PATH" || strings.HasPrefix(rest, "SINK_") || strings.HasPrefix(rest, "SOURCE_") {
			continue
		}
		f, ok := fields[name]
		if !ok {
			warnings = append(warnings, "unknown environment variable "+name+" ignored")
			continue
		}
		if err := setEnvField(reflect.ValueOf(raw).Elem(), f.index, val, runtimeSecrets[f.path]); err != nil {
			return nil, &Error{File: loc.file, Key: f.path, Env: name, Msg: err.Error()}
		}
		loc.env[f.path] = name
	}
	return warnings, nil
}

func (r *Runtime) fromRaw(raw rawRuntime, loc *locator) error {
	r.HTTP, r.Iggy, r.State, r.Logging, r.Telemetry, r.Embedded, r.Plugins = raw.HTTP, raw.Iggy, raw.State, raw.Logging, raw.Telemetry, raw.Embedded, raw.Plugins
	c := raw.Connectors
	r.Connectors = Provider{
		ConfigType: c.ConfigType, ConfigDir: c.ConfigDir, BaseURL: c.BaseURL,
		RequestHeaders: c.RequestHeaders, URLTemplates: c.URLTemplates, Response: c.Response,
		Retry: ProviderRetry{Enabled: c.Retry.Enabled, MaxAttempts: c.Retry.MaxAttempts, BackoffMultiplier: c.Retry.BackoffMultiplier},
	}
	var err error
	for _, d := range []struct {
		path string
		text string
		dst  *time.Duration
	}{
		{"connectors.timeout", c.Timeout, &r.Connectors.Timeout},
		{"connectors.retry.initial_backoff", c.Retry.InitialBackoff, &r.Connectors.Retry.InitialBackoff},
		{"connectors.retry.max_backoff", c.Retry.MaxBackoff, &r.Connectors.Retry.MaxBackoff},
	} {
		if *d.dst, err = sdk.ParseDuration(d.text); err != nil {
			return loc.errorf(d.path, err, "%v", err)
		}
	}
	return nil
}

func (r *Runtime) toRaw() rawRuntime {
	c := r.Connectors
	return rawRuntime{
		HTTP: r.HTTP, Iggy: r.Iggy, State: r.State, Logging: r.Logging, Telemetry: r.Telemetry, Embedded: r.Embedded, Plugins: r.Plugins,
		Connectors: rawProvider{
			ConfigType: c.ConfigType, ConfigDir: c.ConfigDir, BaseURL: c.BaseURL, Timeout: sdk.FormatDuration(c.Timeout),
			RequestHeaders: c.RequestHeaders, URLTemplates: c.URLTemplates, Response: c.Response,
			Retry: rawProviderRetry{Enabled: c.Retry.Enabled, MaxAttempts: c.Retry.MaxAttempts,
				InitialBackoff: sdk.FormatDuration(c.Retry.InitialBackoff), MaxBackoff: sdk.FormatDuration(c.Retry.MaxBackoff),
				BackoffMultiplier: c.Retry.BackoffMultiplier},
		},
	}
}

// String renders the effective config as TOML with secrets shown as "***".
func (r *Runtime) String() string {
	raw := r.toRaw()
	raw.Iggy.Password = Secret(raw.Iggy.Password.String())
	raw.Iggy.Token = Secret(raw.Iggy.Token.String())
	raw.HTTP.APIKey = Secret(raw.HTTP.APIKey.String())
	raw.Connectors.BaseURL = RedactURL(raw.Connectors.BaseURL)
	if len(raw.Connectors.RequestHeaders) > 0 {
		h := make(map[string]Secret, len(raw.Connectors.RequestHeaders))
		for k := range raw.Connectors.RequestHeaders {
			h[k] = "***"
		}
		raw.Connectors.RequestHeaders = h
	}
	b, err := toml.Marshal(raw)
	if err != nil {
		return "config: " + err.Error()
	}
	return string(b)
}

// LogValue makes slog print the redacted TOML form.
func (r *Runtime) LogValue() slog.Value { return slog.StringValue(r.String()) }

// Validate checks a Runtime built or changed by code. Errors name Path (no line).
func (r *Runtime) Validate() error { return r.validate(&locator{file: r.Path}) }

func (r *Runtime) validate(loc *locator) error {
	switch r.Connectors.ConfigType {
	case ProviderLocal:
		if r.Connectors.ConfigDir == "" {
			return loc.errorf("connectors.config_dir", nil, "required when config_type = \"local\" (the directory of connector files)")
		}
	case ProviderHTTP:
		if err := r.Connectors.validateHTTP(loc); err != nil {
			return err
		}
	default:
		return loc.errorf("connectors.config_type", nil, "unknown value %q (want local or http)", r.Connectors.ConfigType)
	}
	if r.Logging.Format != LogText && r.Logging.Format != LogJSON {
		return loc.errorf("logging.format", nil, "unknown value %q (want text or json)", r.Logging.Format)
	}
	if err := r.Telemetry.validate(loc); err != nil {
		return err
	}
	if r.Iggy.Address == "" {
		return loc.errorf("iggy.address", nil, "required")
	}
	for _, a := range strings.Split(r.Iggy.Address, ",") {
		if _, _, err := net.SplitHostPort(strings.TrimSpace(a)); err != nil {
			return loc.errorf("iggy.address", nil, "%q: want host:port, or several separated by commas", r.Iggy.Address)
		}
	}
	if r.Iggy.Token == "" && (r.Iggy.Username == "" || r.Iggy.Password == "") {
		key := "iggy.username"
		if r.Iggy.Username != "" {
			key = "iggy.password"
		}
		return loc.errorf(key, nil, "username and password are required when no token is set")
	}
	if r.Iggy.Token.Reveal() == "file:" {
		return loc.errorf("iggy.token", nil, "file: needs a path")
	}
	if r.Iggy.TLS.Enabled && r.Iggy.TLS.CAFile == "" {
		return loc.errorf("iggy.tls.ca_file", nil, "required when iggy.tls.enabled = true")
	}
	if r.HTTP.Enabled && r.HTTP.Address == "" {
		return loc.errorf("http.address", nil, "required when http.enabled = true")
	}
	if r.HTTP.TLS.Enabled && (r.HTTP.TLS.CertFile == "" || r.HTTP.TLS.KeyFile == "") {
		return loc.errorf("http.tls.cert_file", nil, "cert_file and key_file are required when http.tls.enabled = true")
	}
	if r.State.Path == "" {
		return loc.errorf("state.path", nil, "required")
	}
	if r.Embedded.Enabled && r.Embedded.DataDir == "" {
		return loc.errorf("embedded.data_dir", nil, "required when embedded.enabled = true")
	}
	return nil
}

// ResolveToken returns the personal access token: the token itself, or for "file:<path>"
// the trimmed content of that file ("~" expanded), which must not be empty. Errors name the
// file, never the token.
func (c Iggy) ResolveToken() (string, error) {
	t := c.Token.Reveal()
	p, ok := strings.CutPrefix(t, "file:")
	if !ok {
		return t, nil
	}
	if rest, ok := strings.CutPrefix(p, "~"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("iggy.token: expand %q: %w", p, err)
		}
		p = home + rest
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("iggy.token: read token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("iggy.token: token file %s is empty", p)
	}
	return tok, nil
}

// locator builds *Error values: the line of a key from the document index, or the
// environment variable that set it.
type locator struct {
	file string
	idx  *docIndex
	env  map[string]string // path -> variable name
	// envStreams names the variable prefix when streams were replaced by the environment.
	envStreams string
}

func (l *locator) errorf(path string, cause error, format string, args ...any) *Error {
	e := &Error{File: l.file, Key: path, Msg: fmt.Sprintf(format, args...), Err: cause}
	if name, ok := l.env[path]; ok {
		e.Env = name
		return e
	}
	if l.envStreams != "" && strings.HasPrefix(path, "streams[") {
		e.Env = l.envStreams + "*"
		return e
	}
	e.Line = l.lineFor(path)
	return e
}

// pluginKeys says where each plugin_config key is written (see Common.PluginKeys).
func (l *locator) pluginKeys() map[string]KeyPosition {
	out := map[string]KeyPosition{}
	if name, ok := l.env["plugin_config"]; ok {
		out[""] = KeyPosition{Env: name}
		return out
	}
	if l.idx == nil {
		return nil
	}
	for path, line := range l.idx.lines {
		if path == "plugin_config" {
			out[""] = KeyPosition{Line: line}
		} else if k, ok := strings.CutPrefix(path, "plugin_config."); ok {
			out[k] = KeyPosition{Line: line}
		}
	}
	return out
}

// lineFor is the line of path, or of its nearest written ancestor table, or 1; 0 without a
// document.
func (l *locator) lineFor(path string) int {
	if l.idx == nil {
		return 0
	}
	for p := path; p != ""; {
		if n := l.idx.line(p); n > 0 {
			return n
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 1
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// validate checks [telemetry]: transports, and, for what is enabled, endpoints that are
// http or https URLs with a host, and a positive metrics interval.
func (t Telemetry) validate(loc *locator) error {
	for _, e := range []struct {
		key, transport, endpoint string
		on                       bool
	}{
		{"telemetry.logs", t.Logs.Transport, t.Logs.Endpoint, t.Enabled},
		{"telemetry.traces", t.Traces.Transport, t.Traces.Endpoint, t.Enabled},
		{"telemetry.metrics", t.Metrics.Transport, t.Metrics.Endpoint, t.Enabled && t.Metrics.Enabled},
	} {
		if e.transport != "grpc" && e.transport != "http" {
			return loc.errorf(e.key+".transport", nil, "unknown value %q (want grpc or http)", e.transport)
		}
		if !e.on {
			continue
		}
		u, err := url.Parse(e.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return loc.errorf(e.key+".endpoint", nil, "%q: want an http:// or https:// URL with a host, e.g. http://localhost:4317", e.endpoint)
		}
	}
	if t.Enabled && t.Metrics.Enabled {
		if d, err := sdk.ParseDuration(t.Metrics.Interval); err != nil || d <= 0 {
			return loc.errorf("telemetry.metrics.interval", nil, "%q: want a positive duration such as \"10s\"", t.Metrics.Interval)
		}
	}
	if t.Enabled && t.ServiceName == "" {
		return loc.errorf("telemetry.service_name", nil, "required when telemetry is enabled")
	}
	return nil
}
