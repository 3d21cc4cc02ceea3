package config

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRuntimeDefaults(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "config.toml", "[connectors]\nconfig_dir = \"conn\"\n")
	r, err := ParseRuntimeEnv(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultRuntime()
	want.Connectors.ConfigDir = "conn"
	want.Path = p
	if got, w := fmt.Sprintf("%#v", r), fmt.Sprintf("%#v", want); got != w {
		t.Fatalf("got\n%s\nwant\n%s", got, w)
	}
	checks := map[string]any{
		"http.enabled": r.HTTP.Enabled, "http.address": r.HTTP.Address, "iggy.address": r.Iggy.Address,
		"iggy.username": r.Iggy.Username, "iggy.password": r.Iggy.Password.Reveal(), "state.path": r.State.Path,
		"config_type": r.Connectors.ConfigType, "logging": r.Logging.Format, "timeout": r.Connectors.Timeout,
		"retry.max_backoff": r.Connectors.Retry.MaxBackoff, "cors.methods": strings.Join(r.HTTP.CORS.AllowedMethods, ","),
		"metrics": r.HTTP.Metrics.Endpoint, "tls.ca": r.Iggy.TLS.CAFile, "telemetry": r.Telemetry.ServiceName,
	}
	wantVals := map[string]any{
		"http.enabled": true, "http.address": "127.0.0.1:8081", "iggy.address": "localhost:8090",
		"iggy.username": "iggy", "iggy.password": "iggy", "state.path": "local_state",
		"config_type": ProviderLocal, "logging": LogText, "timeout": 10 * time.Second,
		"retry.max_backoff": 30 * time.Second, "cors.methods": "GET,POST,PUT,DELETE",
		"metrics": "/metrics", "tls.ca": "core/certs/iggy_ca_cert.pem", "telemetry": "iggy-connectors",
	}
	for k, v := range wantVals {
		if checks[k] != v {
			t.Errorf("%s = %v, want %v", k, checks[k], v)
		}
	}
}

func TestRuntimeFileAndEnv(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "config.toml", `
[http]
enabled = false
[http.cors]
allowed_methods = ["GET"]
[iggy]
address = "10.0.0.1:8090"
token = "secret-token"
[iggy.tls]
enabled = true
domain = "iggy.local"
[state]
path = "st"
[connectors]
config_type = "local"
config_dir = "conn"
[logging]
format = "json"
[embedded]
enabled = true
data_dir = "data"
[telemetry]
enabled = true
[telemetry.logs]
transport = "http"
`)
	env := []string{
		"IGGY_CONNECTORS_IGGY_ADDRESS=1.2.3.4:9000",
		"IGGY_CONNECTORS_HTTP_CORS_ALLOWED_METHODS=[GET, \"POST\"]",
		"IGGY_CONNECTORS_IGGY_PASSWORD=1234", // numeric value for a string: taken as text (upstream fails)
		"IGGY_CONNECTORS_HTTP_ENABLED=TRUE",
		"IGGY_CONNECTORS_CONNECTORS_TIMEOUT=1m 30s",
		"IGGY_CONNECTORS_EMBEDDED_ADDRESS=127.0.0.1:0",
		"IGGY_CONNECTORS_LOGGING_FORMAT=", // empty: ignored
		"IGGY_CONNECTORS_BOGUS=1",
		"IGGY_CONNECTORS_SINK_X_NAME=ignored here",
		"IGGY_CONNECTORS_CONFIG_PATH=/nowhere",
		"OTHER=1",
	}
	r, err := ParseRuntimeEnv(p, env)
	if err != nil {
		t.Fatal(err)
	}
	if r.Iggy.Address != "1.2.3.4:9000" || !r.HTTP.Enabled || r.Iggy.Password.Reveal() != "1234" ||
		strings.Join(r.HTTP.CORS.AllowedMethods, ",") != "GET,POST" || r.Connectors.Timeout != 90*time.Second ||
		r.Logging.Format != LogJSON || r.Embedded != (Embedded{Enabled: true, Address: "127.0.0.1:0", DataDir: "data"}) ||
		r.Iggy.TLS != (IggyTLS{Enabled: true, CAFile: "core/certs/iggy_ca_cert.pem", Domain: "iggy.local"}) ||
		r.State.Path != "st" || r.Telemetry.Logs.Transport != "http" || r.Telemetry.Traces.Transport != "grpc" {
		t.Fatalf("unexpected config: %#v", r)
	}
	if len(r.Warnings) != 1 || r.Warnings[0] != "unknown environment variable IGGY_CONNECTORS_BOGUS ignored" {
		t.Fatalf("warnings = %q", r.Warnings)
	}
}

func TestRuntimeEnvPathAndMissingFile(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "rt.toml", "[connectors]\nconfig_dir = \"c\"\n")
	r, err := ParseRuntimeEnv("", []string{"IGGY_CONNECTORS_CONFIG_PATH=" + p})
	if err != nil || r.Path != p || r.Connectors.ConfigDir != "c" {
		t.Fatalf("env path: %v %+v", err, r)
	}
	// A file IGGY_CONNECTORS_CONFIG_PATH names must exist (upstream only warns).
	none := filepath.Join(dir, "none.toml")
	_, err = ParseRuntimeEnv("", []string{"IGGY_CONNECTORS_CONFIG_PATH=" + none})
	if err == nil || err.Error() != none+" (from IGGY_CONNECTORS_CONFIG_PATH): runtime config not found (searched the working directory and its parents)" {
		t.Fatalf("missing env path: %v", err)
	}
	// Missing default file: defaults with a warning, then config_dir is required.
	_, err = ParseRuntimeEnv("", nil)
	wantErr(t, err, "", 0, "connectors.config_dir", "")
	r, err = ParseRuntimeEnv("", []string{"IGGY_CONNECTORS_CONNECTORS_CONFIG_DIR=d"})
	if err != nil || r.Path != "" || len(r.Warnings) != 1 || r.Connectors.ConfigDir != "d" {
		t.Fatalf("missing file: %v %+v", err, r)
	}
	// An explicit path must exist.
	_, err = ParseRuntimeEnv(filepath.Join(dir, "none.toml"), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("explicit missing path: %v", err)
	}
}

func TestRuntimeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		env        []string
		line       int
		key, envv  string
		msg        string
		is         error
	}{
		{name: "unknown key", body: "[connectors]\nconfig_dir = \"c\"\n\n[iggy]\nadress = \"x\"\n", line: 5, key: "iggy.adress", msg: "unknown key"},
		{name: "unknown section", body: "[connectors]\nconfig_dir = \"c\"\n[ferry]\nx = 1\n", line: 3, key: "ferry", msg: "unknown key"},
		{name: "wrong type", body: "[connectors]\nconfig_dir = \"c\"\n[http]\nenabled = \"yes\"\n", line: 4, key: "http.enabled", msg: "expected a boolean (true or false), got string"},
		{name: "missing config_dir", body: "[connectors]\nconfig_type = \"local\"\n", line: 1, key: "connectors.config_dir"},
		{name: "http without base_url", body: "[connectors]\nconfig_type = \"http\"\n", line: 1, key: "connectors.base_url", msg: `required when config_type = "http" (the URL of the config API)`},
		{name: "http relative base_url", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"/api\"\n", line: 3, key: "connectors.base_url", msg: `"/api": want an absolute http:// or https:// URL`},
		{name: "http base_url password hidden", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"ftp://u:hunter2@x/api\"\n", line: 3, key: "connectors.base_url", msg: `"ftp://u:xxxxx@x/api": want an absolute http:// or https:// URL`},
		{name: "http base_url query", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x/api?a=1\"\n", line: 3, key: "connectors.base_url", msg: `"http://x/api?a=1": must not have a query or fragment (the operations' paths are appended to it)`},
		{name: "http zero timeout", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\ntimeout = \"0\"\n", line: 4, key: "connectors.timeout", msg: "must be more than 0 (the bound on one request)"},
		{name: "http bad header name", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\n[connectors.request_headers]\n\"api key\" = \"k\"\n", line: 4, key: "connectors.request_headers", msg: `"api key" is not a valid HTTP header name`},
		{name: "http bad header value", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\n[connectors.request_headers]\napi-key = \"k\\r\\nX: 1\"\n", line: 5, key: "connectors.request_headers.api-key", msg: "the value holds a control character (CR, LF, NUL...)"},
		{name: "http unknown operation", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\n[connectors.url_templates]\nget_all = \"/all\"\n", line: 5, key: "connectors.url_templates.get_all"},
		{name: "http template not a path", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\n[connectors.url_templates]\ncreate_sink = \"sinks/{key}\"\n", line: 5, key: "connectors.url_templates.create_sink", msg: `"sinks/{key}" must start with / (it is appended to base_url)`},
		{name: "http unknown placeholder", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\n[connectors.url_templates]\ncreate_sink = \"/{type}/{key}\"\n", line: 5, key: "connectors.url_templates.create_sink", msg: `"/{type}/{key}": the only placeholders are {key} and {version}`},
		{name: "http version without value", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\n[connectors.url_templates]\ncreate_sink = \"/s/{key}/{version}\"\n", line: 5, key: "connectors.url_templates.create_sink", msg: `"/s/{key}/{version}": {version} has no value in create_sink (only in get_sink_config and get_source_config)`},
		{name: "http empty path segment", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\n[connectors.response]\ndata_path = \"data..config\"\n", line: 5, key: "connectors.response.data_path", msg: `"data..config" has an empty segment (want names or array indexes separated by dots, e.g. data.config)`},
		{name: "http zero backoff", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\n[connectors.retry]\ninitial_backoff = \"0\"\n", line: 5, key: "connectors.retry.initial_backoff", msg: "must be more than 0 when retry.enabled = true"},
		{name: "http max below initial", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\n[connectors.retry]\ninitial_backoff = \"5s\"\nmax_backoff = \"1s\"\n", line: 6, key: "connectors.retry.max_backoff", msg: "must not be less than initial_backoff (5s)"},
		{name: "http zero multiplier", body: "[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\n[connectors.retry]\nbackoff_multiplier = 0\n", line: 5, key: "connectors.retry.backoff_multiplier", msg: "must be at least 1"},
		{name: "bad enum", body: "[connectors]\nconfig_dir = \"c\"\n[logging]\nformat = \"xml\"\n", line: 4, key: "logging.format", msg: `unknown value "xml" (want text or json)`},
		{name: "bad duration", body: "[connectors]\nconfig_dir = \"c\"\ntimeout = \"10 parsecs\"\n", line: 3, key: "connectors.timeout"},
		{name: "bad address", body: "[connectors]\nconfig_dir = \"c\"\n[iggy]\naddress = \"a:1,b\"\n", line: 4, key: "iggy.address", msg: `"a:1,b": want host:port, or several separated by commas`},
		{name: "empty seed", body: "[connectors]\nconfig_dir = \"c\"\n[iggy]\naddress = \"a:1,\"\n", line: 4, key: "iggy.address"},
		{name: "no credentials", body: "[connectors]\nconfig_dir = \"c\"\n[iggy]\npassword = \"\"\n", line: 4, key: "iggy.password"},
		{name: "env bool", body: "[connectors]\nconfig_dir = \"c\"\n", env: []string{"IGGY_CONNECTORS_HTTP_ENABLED=yes"}, key: "http.enabled", envv: "IGGY_CONNECTORS_HTTP_ENABLED", msg: `want true or false, got "yes"`},
		{name: "env enum", body: "[connectors]\nconfig_dir = \"c\"\n", env: []string{"IGGY_CONNECTORS_LOGGING_FORMAT=xml"}, key: "logging.format", envv: "IGGY_CONNECTORS_LOGGING_FORMAT"},
		{name: "syntax", body: "[connectors\n", line: 1, key: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "config.toml", tc.body)
			_, err := ParseRuntimeEnv(p, tc.env)
			ce := wantErr(t, err, p, tc.line, tc.key, tc.envv)
			if tc.msg != "" && ce.Msg != tc.msg {
				t.Errorf("msg = %q, want %q", ce.Msg, tc.msg)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}

func TestRuntimeRedaction(t *testing.T) {
	p := writeFile(t, t.TempDir(), "config.toml", "[connectors]\nconfig_dir = \"c\"\n[iggy]\npassword = \"hunter2\"\ntoken = \"tok-123\"\n[http]\napi_key = \"key-456\"\n")
	r, err := ParseRuntimeEnv(p, []string{"IGGY_CONNECTORS_IGGY_USERNAME=alice"})
	if err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	slog.New(slog.NewTextHandler(&logBuf, nil)).Info("config", "runtime", r, "iggy", r.Iggy)
	for _, s := range []string{r.String(), fmt.Sprint(r.Iggy), fmt.Sprintf("%+v", *r), fmt.Sprintf("%#v", r.HTTP), logBuf.String()} {
		for _, secret := range []string{"hunter2", "tok-123", "key-456"} {
			if strings.Contains(s, secret) {
				t.Fatalf("secret %q in %s", secret, s)
			}
		}
	}
	if !strings.Contains(r.String(), `password = '***'`) || !strings.Contains(r.String(), `username = 'alice'`) {
		t.Fatalf("String() = %s", r.String())
	}
	// A bad secret from the environment is not echoed.
	_, err = ParseRuntimeEnv(p, []string{"IGGY_CONNECTORS_IGGY_TLS_ENABLED=hunter2"})
	if err == nil || !strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("non-secret values are shown: %v", err) // ca_file/enabled are not secrets
	}
}

func TestResolveToken(t *testing.T) {
	dir := t.TempDir()
	tf := writeFile(t, dir, "tok", "  abc\n")
	empty := writeFile(t, dir, "empty", " \n")
	for _, tc := range []struct {
		token, want string
		fail        bool
	}{{"plain", "plain", false}, {"file:" + tf, "abc", false}, {"file:" + empty, "", true}, {"file:" + dir + "/none", "", true}} {
		got, err := Iggy{Token: Secret(tc.token)}.ResolveToken()
		if got != tc.want || (err != nil) != tc.fail {
			t.Errorf("ResolveToken(%q) = %q, %v", tc.token, got, err)
		}
	}
}

// TestRuntimeIggySeeds: [iggy] address may list several seed addresses separated by
// commas; the value is kept as written (the client splits it).
func TestRuntimeIggySeeds(t *testing.T) {
	p := writeFile(t, t.TempDir(), "config.toml", "[connectors]\nconfig_dir = \"c\"\n[iggy]\naddress = \"10.0.0.1:8090, 10.0.0.2:8090\"\n")
	r, err := ParseRuntimeEnv(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Iggy.Address != "10.0.0.1:8090, 10.0.0.2:8090" {
		t.Fatalf("iggy.address = %q", r.Iggy.Address)
	}
}

// TestDefaultPasswordMarked: the built-in iggy password is marked as a default, so the
// embedded server can refuse it off loopback (issue 14).
func TestDefaultPasswordMarked(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.toml")
	for _, tc := range []struct {
		toml string
		env  []string
		want bool
	}{
		{"[iggy]\naddress = \"0.0.0.0:8090\"\n", nil, true},
		{"[iggy]\nusername = \"admin\"\n", nil, true},
		{"[iggy]\npassword = \"iggy\"\n", nil, false},
		{"", []string{"IGGY_CONNECTORS_IGGY_PASSWORD=pw"}, false},
	} {
		if err := os.WriteFile(p, []byte("[connectors]\nconfig_dir = \"c\"\n"+tc.toml), 0o600); err != nil {
			t.Fatal(err)
		}
		rc, err := ParseRuntimeEnv(p, tc.env)
		if err != nil {
			t.Fatal(err)
		}
		if rc.Iggy.DefaultPassword != tc.want || rc.Iggy.Password.Reveal() == "" {
			t.Errorf("%q %v: DefaultPassword %v, want %v", tc.toml, tc.env, rc.Iggy.DefaultPassword, tc.want)
		}
	}
	if !DefaultRuntime().Iggy.DefaultPassword {
		t.Error("DefaultRuntime: DefaultPassword false")
	}
}

// TestParseRuntimeNoFile: with no runtime config anywhere, the error says that no file was
// read and how to name one, instead of naming an empty file (": connectors.config_dir").
func TestParseRuntimeNoFile(t *testing.T) {
	t.Chdir(t.TempDir())
	_, err := ParseRuntimeEnv("", nil)
	want := "no runtime config: core/connectors/runtime/config.toml not found in the working directory or its parents " +
		"(give its path with --config or IGGY_CONNECTORS_CONFIG_PATH): connectors.config_dir: required when config_type = \"local\" (the directory of connector files)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

// TestRuntimeHTTPProvider: the http provider's keys, as upstream's README writes them, and
// their secrets (header values, a password in base_url) kept out of every rendering.
func TestRuntimeHTTPProvider(t *testing.T) {
	p := writeFile(t, t.TempDir(), "config.toml", `[connectors]
config_type = "http"
base_url = "http://ops:pw-789@localhost:8080/api"
timeout = "3 s"

[connectors.request_headers]
api-key = "key-123"

[connectors.retry]
enabled = true
max_attempts = 5
initial_backoff = "1 s"
max_backoff = "30 s"
backoff_multiplier = 3

[connectors.url_templates]
create_sink = "/v2/sinks/{key}"
get_sink_config = "/v2/sinks/{key}/versions/{version}"

[connectors.response]
data_path = "data"
error_path = "error.message"
`)
	r, err := ParseRuntimeEnv(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Connectors
	if c.ConfigType != ProviderHTTP || c.BaseURL != "http://ops:pw-789@localhost:8080/api" || c.Timeout != 3*time.Second ||
		c.RequestHeaders["api-key"].Reveal() != "key-123" || c.Retry.MaxAttempts != 5 || c.Retry.BackoffMultiplier != 3 ||
		c.Retry.InitialBackoff != time.Second || c.Retry.MaxBackoff != 30*time.Second ||
		c.URLTemplates["get_sink_config"] != "/v2/sinks/{key}/versions/{version}" || c.Response.ErrorPath != "error.message" {
		t.Fatalf("parsed %+v", c)
	}
	var logBuf bytes.Buffer
	slog.New(slog.NewTextHandler(&logBuf, nil)).Info("config", "runtime", r)
	// Header values are Secrets: no rendering shows them. base_url is a string: the
	// renderings Ferry logs (String, LogValue) hide its password.
	for _, s := range []string{r.String(), fmt.Sprintf("%+v", *r), fmt.Sprintf("%#v", r.Connectors), logBuf.String()} {
		if strings.Contains(s, "key-123") {
			t.Fatalf("the header value in %s", s)
		}
	}
	for _, s := range []string{r.String(), logBuf.String()} {
		if strings.Contains(s, "pw-789") {
			t.Fatalf("base_url's password in %s", s)
		}
	}
	if !strings.Contains(r.String(), `api-key = '***'`) || !strings.Contains(r.String(), `base_url = 'http://ops:xxxxx@localhost:8080/api'`) {
		t.Fatalf("String() = %s", r.String())
	}
}

// TestRuntimeHTTPProviderEnv: the http provider's scalar keys from the environment, as
// upstream's loader names them.
func TestRuntimeHTTPProviderEnv(t *testing.T) {
	p := writeFile(t, t.TempDir(), "config.toml", "[connectors]\nconfig_dir = \"c\"\n")
	r, err := ParseRuntimeEnv(p, []string{
		"IGGY_CONNECTORS_CONNECTORS_CONFIG_TYPE=http", "IGGY_CONNECTORS_CONNECTORS_BASE_URL=http://cfg:8080",
		"IGGY_CONNECTORS_CONNECTORS_TIMEOUT=2s", "IGGY_CONNECTORS_CONNECTORS_RESPONSE_DATA_PATH=data",
		"IGGY_CONNECTORS_CONNECTORS_RESPONSE_ERROR_PATH=error", "IGGY_CONNECTORS_CONNECTORS_RETRY_MAX_ATTEMPTS=7",
	})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Connectors
	if c.ConfigType != ProviderHTTP || c.BaseURL != "http://cfg:8080" || c.Timeout != 2*time.Second || c.Response.DataPath != "data" ||
		c.Response.ErrorPath != "error" || c.Retry.MaxAttempts != 7 || len(r.Warnings) != 0 {
		t.Fatalf("%+v %v", c, r.Warnings)
	}
}
