package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/configjson"
)

// HTTP serves connector configs from a remote HTTP API, as the http config provider of
// Iggy's runtime does ([connectors] config_type = "http"): the same operations, default
// paths and url_templates, request_headers on every request, response.data_path and
// response.error_path, a timeout per request, and retries of transient failures with
// exponential backoff. Configs are read as connector files are, without environment
// overrides (as upstream).
//
// Its methods are safe for concurrent use. Requests made through the config-store methods
// (which take no context) end at the latest when Close is called.
type HTTP struct {
	base      string // base_url without a trailing slash
	shown     string // base_url as logs and errors may show it (no password)
	templates map[string]string
	headers   http.Header
	timeout   time.Duration
	retry     config.ProviderRetry
	extract   extractor
	client    *http.Client
	log       *slog.Logger
	// pluginDirs: where a created config's native plugin may lie, as for the local provider.
	pluginDirs []string

	ctx    context.Context // bounds the requests of the methods without a context
	cancel context.CancelFunc

	// sleep waits d before a retry (a test replaces it to act between attempts).
	sleep func(ctx context.Context, d time.Duration) error
}

// HTTPOptions are the parts of an HTTP provider that do not come from [connectors].
type HTTPOptions struct {
	Logger *slog.Logger // nil: slog.Default()
	// PluginDirs are where a created config's native plugin may lie (the runtime's
	// [config.Runtime.PluginDirs]); nil: [config.DefaultPluginDirs] of "".
	PluginDirs []string
}

// NewHTTP returns the provider of c, a [connectors] section with config_type = "http"
// that [config.Runtime.Validate] accepted. It makes no request.
func NewHTTP(c config.Provider, o HTTPOptions) (*HTTP, error) {
	if c.ConfigType != config.ProviderHTTP {
		return nil, fmt.Errorf("provider: config_type is %q, not http", c.ConfigType)
	}
	if _, err := url.Parse(c.BaseURL); err != nil || c.BaseURL == "" {
		return nil, fmt.Errorf("provider: connectors.base_url %s: want an absolute URL", config.RedactURL(c.BaseURL))
	}
	p := &HTTP{
		base:       strings.TrimSuffix(c.BaseURL, "/"),
		shown:      strings.TrimSuffix(config.RedactURL(c.BaseURL), "/"),
		templates:  map[string]string{},
		headers:    http.Header{},
		timeout:    c.Timeout,
		retry:      c.Retry,
		extract:    extractor{dataPath: c.Response.DataPath, errorPath: c.Response.ErrorPath},
		log:        o.Logger,
		pluginDirs: o.PluginDirs,
		sleep:      sleepCtx,
	}
	for op, t := range config.ProviderOperations {
		p.templates[op] = t
	}
	for op, t := range c.URLTemplates {
		p.templates[op] = t
	}
	for k, v := range c.RequestHeaders {
		p.headers.Set(k, v.Reveal())
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.pluginDirs == nil {
		p.pluginDirs = config.DefaultPluginDirs("")
	}
	if p.timeout <= 0 {
		p.timeout = 10 * time.Second
	}
	// No redirect is followed: the request headers (secrets) must reach base_url's origin
	// only, never another host nor http after https; a redirect is an error (redirectError).
	p.client = &http.Client{Timeout: p.timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// Close ends the requests in flight and the waits between retries, and closes the idle
// connections (their goroutines end); later requests fail.
func (p *HTTP) Close() {
	p.cancel()
	p.client.CloseIdleConnections()
}

// String names the provider in logs: its base_url, without a password.
func (p *HTTP) String() string { return "config provider " + p.shown }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answer is one final response of the provider.
type answer struct {
	status   int
	body     []byte
	url      string   // as shown in errors
	target   *url.URL // the URL asked
	location string   // a redirect's Location, resolved against target ("" when none)
}

// maxAnswer bounds a provider's answer: a config answer is small, and a provider that
// sends without end must not fill the memory.
const maxAnswer = 16 << 20

// errTooLarge is an answer past maxAnswer: final, not retried (the same API sends the
// same answer again).
var errTooLarge = fmt.Errorf("the response is too large: over the 16 MiB (%d bytes) a config answer may hold", maxAnswer)

// do sends one operation, retrying transient failures (a transport error or timeout, 408,
// 429 and 5xx) max_attempts times after the first, with exponential backoff; it returns the
// last answer, or the error of the last attempt wrapping [ErrProviderRequest].
func (p *HTTP) do(ctx context.Context, method, op string, vars map[string]string, query url.Values, body []byte) (answer, error) {
	path := p.templates[op]
	for k, v := range vars {
		path = strings.ReplaceAll(path, "{"+k+"}", url.PathEscape(v))
	}
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	target, shown := p.base+path, p.shown+path
	attempts := uint64(1)
	if p.retry.Enabled {
		attempts += uint64(p.retry.MaxAttempts)
	}
	for n := uint64(1); ; n++ {
		a, err := p.once(ctx, method, target, body)
		a.url = shown
		if errors.Is(err, errTooLarge) {
			return answer{}, fmt.Errorf("%w: %s %s: HTTP %d: %w", ErrProviderRequest, method, shown, a.status, err)
		}
		transient := err != nil || a.status == http.StatusRequestTimeout || a.status == http.StatusTooManyRequests || a.status >= 500
		if !transient {
			return a, nil
		}
		if err == nil {
			err = p.statusError(method, a)
		} else {
			err = fmt.Errorf("%w: %s %s: %w", ErrProviderRequest, method, shown, stripURL(err))
		}
		if n >= attempts || ctx.Err() != nil {
			if n > 1 {
				err = fmt.Errorf("%w (after %d attempts)", err, n)
			}
			return answer{}, err
		}
		wait := p.backoff(n)
		p.log.Warn("config provider: request failed, retrying", "method", method, "url", shown, "attempt", n, "of", attempts, "retry_in", wait, "error", err)
		if serr := p.sleep(ctx, wait); serr != nil {
			return answer{}, fmt.Errorf("%w (given up: %w)", err, serr)
		}
	}
}

// stripURL returns the cause of a *url.Error: the URL is already in the message.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("timed out: %w", ue.Err)
		}
		return ue.Err
	}
	return err
}

func (p *HTTP) once(ctx context.Context, method, target string, body []byte) (answer, error) {
	rctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, target, rd)
	if err != nil {
		return answer{}, err
	}
	for k, v := range p.headers {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	a := answer{status: resp.StatusCode, target: req.URL}
	if loc, err := resp.Location(); err == nil {
		a.location = loc.String()
	} else if raw := resp.Header.Get("Location"); raw != "" {
		a.location = raw // does not parse: shown as given, cut
	}
	// One byte past the cap tells an answer of exactly maxAnswer from a larger one.
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return answer{}, fmt.Errorf("read the response: %w", err)
	}
	if len(b) > maxAnswer {
		return a, errTooLarge
	}
	a.body = b
	return a, nil
}

// redirectError is the error of a redirect (a 3xx answer with a Location), which the
// provider never follows: Go's client would send request_headers (an API key, a token)
// to wherever the Location points, another host or plain http after https, and turns
// a POST or PUT answered 301, 302 or 303 into a GET, which would read as a success.
// The error names the Location and why following it would be wrong.
func (p *HTTP) redirectError(method string, a answer) error {
	loc := a.location
	why := ""
	if u, err := url.Parse(loc); err == nil && u.IsAbs() {
		loc = u.Redacted()
		switch {
		case a.target != nil && a.target.Scheme == "https" && u.Scheme != "https":
			why = "it leads from https to " + u.Scheme + ", where the request headers would travel in clear text; "
		case a.target != nil && (u.Scheme != a.target.Scheme || u.Host != a.target.Host):
			why = "it leads to another origin (" + u.Scheme + "://" + u.Host + "), which would receive the request headers; "
		}
	} else {
		loc = excerpt([]byte(loc))
	}
	return fmt.Errorf("%w: %s %s: HTTP %d: redirect to %s refused: %sthe config provider follows no redirect (set connectors.base_url, or the operation's url_templates, to where the API answers)",
		ErrProviderRequest, method, a.url, a.status, loc, why)
}

// backoff is the wait after the n-th failed attempt: initial_backoff × multiplier^(n-1),
// at most max_backoff, less a random part of up to half (bounded jitter), so that many
// runtimes do not retry in step.
func (p *HTTP) backoff(n uint64) time.Duration {
	d := p.retry.InitialBackoff
	for i := uint64(1); i < n && d < p.retry.MaxBackoff; i++ {
		d *= time.Duration(max(p.retry.BackoffMultiplier, 1))
	}
	d = min(d, p.retry.MaxBackoff)
	if half := int64(d / 2); half > 0 {
		d -= time.Duration(rand.Int64N(half + 1))
	}
	return d
}

// statusError is the error of an answer with a status that is not a success: the message
// at response.error_path when the body has one, else the body's start.
func (p *HTTP) statusError(method string, a answer) error {
	msg := p.extract.errorAt(a.body)
	if msg == "" {
		msg = excerpt(a.body)
	}
	return fmt.Errorf("%w: %s %s: HTTP %d: %s", ErrProviderRequest, method, a.url, a.status, msg)
}

// call sends an operation and returns the payload of its successful answer (nil for
// DELETE and PUT, whose body is not read). When what is not "", a 404 is
// [ErrConfigNotFound] naming what.
func (p *HTTP) call(ctx context.Context, method, op string, vars map[string]string, query url.Values, body []byte, what string) (json.RawMessage, error) {
	a, err := p.do(ctx, method, op, vars, query, body)
	if err != nil {
		return nil, err
	}
	if a.status >= 300 && a.status <= 399 && a.location != "" {
		err := p.redirectError(method, a)
		p.log.Warn("config provider: redirect refused", "method", method, "url", a.url, "status", a.status, "error", err)
		return nil, err
	}
	if a.status == http.StatusNotFound && what != "" {
		return nil, fmt.Errorf("%w: %s at %s", ErrConfigNotFound, what, p.String())
	}
	if a.status < 200 || a.status > 299 {
		return nil, p.statusError(method, a)
	}
	if method == http.MethodDelete || method == http.MethodPut {
		return nil, nil
	}
	v, err := p.extract.data(a.body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrProviderRequest, method, a.url, err)
	}
	return v, nil
}

// head is the part of a config object that names its connector.
type head struct {
	Key     *string `json:"key"`
	Version *uint64 `json:"version"`
	Enabled *bool   `json:"enabled"`
	Name    any     `json:"name"`
	Path    any     `json:"path"`
}

// parse reads one config object of the provider as (typ, key). want: the key it must
// name ("" = any). file names it in errors.
func parse[C config.Sink | config.Source](typ config.ConnectorType, want string, raw json.RawMessage, file string) (*C, head, error) {
	var h head
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, h, &config.Error{File: file, Msg: "not a connector config object: " + err.Error(), Err: config.ErrInvalidConfig}
	}
	switch {
	case h.Key == nil:
		return nil, h, &config.Error{File: file, Key: "key", Msg: "required", Err: config.ErrInvalidConfig}
	case h.Version == nil:
		return nil, h, &config.Error{File: file, Key: "version", Msg: "required", Err: config.ErrInvalidConfig}
	case want != "" && *h.Key != want:
		return nil, h, &config.Error{File: file, Key: "key", Msg: fmt.Sprintf("%q, want %q", *h.Key, want), Err: config.ErrInvalidConfig}
	}
	c, err := configjson.ConnectorFromJSON(typ, *h.Key, *h.Version, raw, file, nil)
	if err != nil {
		return nil, h, err
	}
	return c.(*C), h, nil
}

func (p *HTTP) file(op string, typ config.ConnectorType, key string) string {
	return fmt.Sprintf("%s (%s, %s %q)", p.String(), op, typ, key)
}

// activeConfigs is the answer of get_active_configs.
type activeConfigs struct {
	Sinks   map[string]json.RawMessage
	Sources map[string]json.RawMessage
}

// activeShape reads the payload of get_active_configs, which must be an object with both
// "sinks" and "sources", each an object of key → config ({} for none; other keys are
// ignored). Anything else is refused whole: a reload applies the answer as the complete
// list of connectors, so a maintenance page, a null or a missing key read as "no
// connectors" would stop every one of them.
func activeShape(raw json.RawMessage) (activeConfigs, error) {
	const want = `{"sinks": {KEY: SinkConfig, …}, "sources": {KEY: SourceConfig, …}}`
	var ac activeConfigs
	if firstByte(raw) != '{' {
		return ac, fmt.Errorf("the active configs are %s, not %s", shape(raw), want)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return ac, fmt.Errorf("the active configs are not %s: %w", want, err)
	}
	var missing []string
	for _, k := range []string{"sinks", "sources"} {
		if _, ok := top[k]; !ok {
			missing = append(missing, `"`+k+`"`)
		}
	}
	if len(missing) > 0 {
		return ac, fmt.Errorf("the active configs lack %s (the answer is %s), want %s", strings.Join(missing, " and "), shape(raw), want)
	}
	for _, k := range []string{"sinks", "sources"} {
		v := top[k]
		if firstByte(v) != '{' {
			return ac, fmt.Errorf("the active configs' %q is %s, not an object of key → config ({} for none)", k, shape(v))
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			return ac, fmt.Errorf("the active configs' %q: %w", k, err)
		}
		if k == "sinks" {
			ac.Sinks = m
		} else {
			ac.Sources = m
		}
	}
	return ac, nil
}

// Load reads the active config of every connector (get_active_configs), as
// [config.LoadConnectors] reads a config_dir: a config that names its connector but does
// not load is in Invalid (the runtime shows it in error and runs the others). ctx bounds
// the requests and the waits between retries.
func (p *HTTP) Load(ctx context.Context) (*config.Connectors, error) {
	out, bad, err := p.active(ctx)
	if err != nil {
		return nil, err
	}
	for _, fe := range bad {
		out.Invalid = append(out.Invalid, fe.inv)
	}
	sort.Slice(out.Invalid, func(i, j int) bool {
		a, b := out.Invalid[i], out.Invalid[j]
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.Key < b.Key
	})
	return out, nil
}

// Scan reads the active configs for a reload (connect.ConnectorScanner): a config that
// does not load is listed apart, and the connector it names keeps running its old one.
func (p *HTTP) Scan() (*config.Connectors, []config.FileError, error) {
	out, bad, err := p.active(p.ctx)
	if err != nil {
		return nil, nil, err
	}
	var fes []config.FileError
	for _, b := range bad {
		fes = append(fes, config.FileError{File: b.inv.File, Type: b.inv.Type, Key: b.inv.Key, Err: b.inv.Err})
	}
	return out, fes, nil
}

type invalid struct{ inv *config.Invalid }

func (p *HTTP) active(ctx context.Context) (*config.Connectors, []invalid, error) {
	raw, err := p.call(ctx, http.MethodGet, config.OpGetActiveConfigs, nil, nil, nil, "")
	if err != nil {
		return nil, nil, err
	}
	ac, err := activeShape(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: GET %s: %w", ErrProviderRequest, p.shown+p.templates[config.OpGetActiveConfigs], err)
	}
	out := &config.Connectors{}
	var bad []invalid
	note := func(typ config.ConnectorType, key string, h head, err error) {
		inv := &config.Invalid{Type: typ, Key: key, File: p.file(config.OpGetActiveConfigs, typ, key), Err: err}
		if h.Version != nil {
			inv.Version = *h.Version
		}
		inv.Enabled = h.Enabled == nil || *h.Enabled
		inv.Name, _ = h.Name.(string)
		inv.Path, _ = h.Path.(string)
		bad = append(bad, invalid{inv})
	}
	for _, key := range sortedKeys(ac.Sinks) {
		s, h, err := parse[config.Sink](config.TypeSink, key, ac.Sinks[key], p.file(config.OpGetActiveConfigs, config.TypeSink, key))
		if err != nil {
			note(config.TypeSink, key, h, err)
			continue
		}
		out.Sinks = append(out.Sinks, s)
	}
	for _, key := range sortedKeys(ac.Sources) {
		s, h, err := parse[config.Source](config.TypeSource, key, ac.Sources[key], p.file(config.OpGetActiveConfigs, config.TypeSource, key))
		if err != nil {
			note(config.TypeSource, key, h, err)
			continue
		}
		out.Sources = append(out.Sources, s)
	}
	return out, bad, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func one[C config.Sink | config.Source](p *HTTP, typ config.ConnectorType, op, key string, version *uint64) (*C, error) {
	vars := map[string]string{"key": key}
	what := fmt.Sprintf("%s %q (active version)", typ, key)
	if version != nil {
		vars["version"] = strconv.FormatUint(*version, 10)
		what = fmt.Sprintf("%s %q version %d", typ, key, *version)
	}
	raw, err := p.call(p.ctx, http.MethodGet, op, vars, nil, nil, what)
	if err != nil {
		return nil, err
	}
	c, h, err := parse[C](typ, key, raw, p.file(op, typ, key))
	if err != nil {
		return nil, err
	}
	if version != nil && *h.Version != *version {
		return nil, &config.Error{File: p.file(op, typ, key), Key: "version", Msg: fmt.Sprintf("%d, want %d", *h.Version, *version), Err: config.ErrInvalidConfig}
	}
	return c, nil
}

func list[C config.Sink | config.Source](p *HTTP, typ config.ConnectorType, op, key string) ([]*C, error) {
	raw, err := p.call(p.ctx, http.MethodGet, op, map[string]string{"key": key}, nil, nil, "")
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if firstByte(raw) != '[' {
		return nil, fmt.Errorf("%w: %s: the configs of %s %q are %s, not an array", ErrProviderRequest, p.file(op, typ, key), typ, key, shape(raw))
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("%w: %s: the configs of %s %q are not an array: %w", ErrProviderRequest, p.file(op, typ, key), typ, key, err)
	}
	out := make([]*C, 0, len(items))
	versions := make([]uint64, 0, len(items))
	for i, it := range items {
		c, h, err := parse[C](typ, key, it, fmt.Sprintf("%s[%d]", p.file(op, typ, key), i))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		versions = append(versions, *h.Version)
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return versions[idx[a]] < versions[idx[b]] })
	sorted := make([]*C, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted, nil
}

// ActiveSink returns the active config of sink key (get_active_sink_config); a 404 is
// [ErrConfigNotFound].
func (p *HTTP) ActiveSink(key string) (*config.Sink, error) {
	return one[config.Sink](p, config.TypeSink, config.OpGetActiveSinkConfig, key, nil)
}

// ActiveSource returns the active config of source key; see [HTTP.ActiveSink].
func (p *HTTP) ActiveSource(key string) (*config.Source, error) {
	return one[config.Source](p, config.TypeSource, config.OpGetActiveSourceConfig, key, nil)
}

// SinkConfig returns version of sink key (get_sink_config); a 404 is
// [ErrConfigNotFound].
func (p *HTTP) SinkConfig(key string, version uint64) (*config.Sink, error) {
	return one[config.Sink](p, config.TypeSink, config.OpGetSinkConfig, key, &version)
}

// SourceConfig returns version of source key; see [HTTP.SinkConfig].
func (p *HTTP) SourceConfig(key string, version uint64) (*config.Source, error) {
	return one[config.Source](p, config.TypeSource, config.OpGetSourceConfig, key, &version)
}

// SinkConfigs returns every version of sink key (get_sink_configs), sorted by version.
func (p *HTTP) SinkConfigs(key string) ([]*config.Sink, error) {
	return list[config.Sink](p, config.TypeSink, config.OpGetSinkConfigs, key)
}

// SourceConfigs returns every version of source key; see [HTTP.SinkConfigs].
func (p *HTTP) SourceConfigs(key string) ([]*config.Source, error) {
	return list[config.Source](p, config.TypeSource, config.OpGetSourceConfigs, key)
}

// CreateSink checks body as the local provider does (a CreateSinkConfig JSON object that
// makes a valid config, its plugin inside the plugin directories), then sends it as given
// to create_sink and returns the config the provider answers. A body that does not make a
// valid config is refused without a request, wrapping [config.ErrInvalidConfig].
func (p *HTTP) CreateSink(key string, body []byte) (*config.Sink, error) {
	return create[config.Sink](p, config.TypeSink, config.OpCreateSink, key, body)
}

// CreateSource creates a version of source key; see [HTTP.CreateSink].
func (p *HTTP) CreateSource(key string, body []byte) (*config.Source, error) {
	return create[config.Source](p, config.TypeSource, config.OpCreateSource, key, body)
}

func create[C config.Sink | config.Source](p *HTTP, typ config.ConnectorType, op, key string, body []byte) (*C, error) {
	if key == "" {
		return nil, fmt.Errorf("%w: connector key is empty", config.ErrInvalidConfig)
	}
	c, err := configjson.ConnectorFromJSON(typ, key, 0, body, configjson.BodyFile, nil)
	if err != nil {
		return nil, err
	}
	if err := checkPlugin(c, p.pluginDirs); err != nil {
		return nil, err
	}
	raw, err := p.call(p.ctx, http.MethodPost, op, map[string]string{"key": key}, nil, body, "")
	if err != nil {
		return nil, err
	}
	out, _, err := parse[C](typ, key, raw, p.file(op, typ, key))
	if err != nil {
		return nil, fmt.Errorf("%w: the created config: %w", ErrProviderRequest, err)
	}
	return out, nil
}

// checkPlugin refuses a new config whose native plugin lies outside dirs, or would once
// it exists (config.CheckPluginPlace), so that no provider stores a path the runtime
// would refuse to load.
func checkPlugin(c any, dirs []string) error {
	var common *config.Common
	switch c := c.(type) {
	case *config.Sink:
		common = &c.Common
	case *config.Source:
		common = &c.Common
	default:
		return nil
	}
	if _, ok := common.Builtin(); ok {
		return nil
	}
	if err := config.CheckPluginPlace(common.Path, dirs); err != nil {
		return &config.Error{File: configjson.BodyFile, Key: "path", Msg: err.Error(), Err: config.ErrInvalidConfig}
	}
	return nil
}

// DeleteSinkConfig deletes version of sink key, or without a version the active one
// (delete_sink_config, with ?version=N when given); a 404 is [ErrConfigNotFound].
func (p *HTTP) DeleteSinkConfig(key string, version *uint64) error {
	return p.delete(config.TypeSink, config.OpDeleteSinkConfig, key, version)
}

// DeleteSourceConfig deletes a version of source key; see [HTTP.DeleteSinkConfig].
func (p *HTTP) DeleteSourceConfig(key string, version *uint64) error {
	return p.delete(config.TypeSource, config.OpDeleteSourceConfig, key, version)
}

func (p *HTTP) delete(typ config.ConnectorType, op, key string, version *uint64) error {
	var q url.Values
	what := fmt.Sprintf("%s %q (active version)", typ, key)
	if version != nil {
		q = url.Values{"version": {strconv.FormatUint(*version, 10)}}
		what = fmt.Sprintf("%s %q version %d", typ, key, *version)
	}
	_, err := p.call(p.ctx, http.MethodDelete, op, map[string]string{"key": key}, q, nil, what)
	return err
}

// SetActiveSink makes version the active one of sink key (set_active_sink, body
// {"version": N}); a 404 is [ErrConfigNotFound].
func (p *HTTP) SetActiveSink(key string, version uint64) error {
	return p.setActive(config.TypeSink, config.OpSetActiveSink, key, version)
}

// SetActiveSource makes version the active one of source key; see [HTTP.SetActiveSink].
func (p *HTTP) SetActiveSource(key string, version uint64) error {
	return p.setActive(config.TypeSource, config.OpSetActiveSource, key, version)
}

func (p *HTTP) setActive(typ config.ConnectorType, op, key string, version uint64) error {
	body := []byte(`{"version":` + strconv.FormatUint(version, 10) + `}`)
	_, err := p.call(p.ctx, http.MethodPut, op, map[string]string{"key": key}, nil, body, fmt.Sprintf("%s %q version %d", typ, key, version))
	return err
}
