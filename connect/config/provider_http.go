package config

import (
	"maps"
	"net/url"
	"slices"
	"strings"
)

// The operations of the http config provider, as keys of connectors.url_templates, with
// their default paths (relative to base_url; {key} and {version} are replaced).
const (
	OpCreateSink            = "create_sink"
	OpCreateSource          = "create_source"
	OpGetActiveConfigs      = "get_active_configs"
	OpGetActiveVersions     = "get_active_versions"
	OpSetActiveSink         = "set_active_sink"
	OpSetActiveSource       = "set_active_source"
	OpGetSinkConfigs        = "get_sink_configs"
	OpGetSinkConfig         = "get_sink_config"
	OpGetActiveSinkConfig   = "get_active_sink_config"
	OpGetSourceConfigs      = "get_source_configs"
	OpGetSourceConfig       = "get_source_config"
	OpGetActiveSourceConfig = "get_active_source_config"
	OpDeleteSinkConfig      = "delete_sink_config"
	OpDeleteSourceConfig    = "delete_source_config"
)

// ProviderOperations maps each operation of the http config provider to its default path.
var ProviderOperations = map[string]string{
	OpCreateSink:            "/sinks/{key}/configs",
	OpCreateSource:          "/sources/{key}/configs",
	OpGetActiveConfigs:      "/configs/active",
	OpGetActiveVersions:     "/configs/active/versions",
	OpSetActiveSink:         "/sinks/{key}/configs/active",
	OpSetActiveSource:       "/sources/{key}/configs/active",
	OpGetSinkConfigs:        "/sinks/{key}/configs",
	OpGetSinkConfig:         "/sinks/{key}/configs/{version}",
	OpGetActiveSinkConfig:   "/sinks/{key}/configs/active",
	OpGetSourceConfigs:      "/sources/{key}/configs",
	OpGetSourceConfig:       "/sources/{key}/configs/{version}",
	OpGetActiveSourceConfig: "/sources/{key}/configs/active",
	OpDeleteSinkConfig:      "/sinks/{key}/configs",
	OpDeleteSourceConfig:    "/sources/{key}/configs",
}

// validateHTTP checks the [connectors] keys of config_type = "http": everything a request
// would otherwise fail on, found before anything starts.
func (p *Provider) validateHTTP(loc *locator) error {
	if p.BaseURL == "" {
		return loc.errorf("connectors.base_url", nil, "required when config_type = \"http\" (the URL of the config API)")
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return loc.errorf("connectors.base_url", nil, "%q: want an absolute http:// or https:// URL", RedactURL(p.BaseURL))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return loc.errorf("connectors.base_url", nil, "%q: must not have a query or fragment (the operations' paths are appended to it)", RedactURL(p.BaseURL))
	}
	if p.Timeout <= 0 {
		return loc.errorf("connectors.timeout", nil, "must be more than 0 (the bound on one request)")
	}
	for _, name := range sortedKeys(p.RequestHeaders) {
		if !validHeaderName(name) {
			return loc.errorf("connectors.request_headers", nil, "%q is not a valid HTTP header name", name)
		}
		if !validHeaderValue(p.RequestHeaders[name].Reveal()) {
			// The value may be a secret: it is never quoted.
			return loc.errorf("connectors.request_headers."+name, nil, "the value holds a control character (CR, LF, NUL...)")
		}
	}
	for _, op := range sortedKeys(p.URLTemplates) {
		path := "connectors.url_templates." + op
		if _, ok := ProviderOperations[op]; !ok {
			return loc.errorf(path, nil, "unknown operation (want one of %s)", strings.Join(slices.Sorted(maps.Keys(ProviderOperations)), ", "))
		}
		t := p.URLTemplates[op]
		if !strings.HasPrefix(t, "/") {
			return loc.errorf(path, nil, "%q must start with / (it is appended to base_url)", t)
		}
		rest := strings.NewReplacer("{key}", "", "{version}", "").Replace(t)
		if strings.ContainsAny(rest, "{}") {
			return loc.errorf(path, nil, "%q: the only placeholders are {key} and {version}", t)
		}
		if strings.Contains(t, "{version}") && op != OpGetSinkConfig && op != OpGetSourceConfig {
			return loc.errorf(path, nil, "%q: {version} has no value in %s (only in %s and %s)", t, op, OpGetSinkConfig, OpGetSourceConfig)
		}
	}
	for key, p := range map[string]string{"connectors.response.data_path": p.Response.DataPath, "connectors.response.error_path": p.Response.ErrorPath} {
		if p != "" && slices.Contains(strings.Split(p, "."), "") {
			return loc.errorf(key, nil, "%q has an empty segment (want names or array indexes separated by dots, e.g. data.config)", p)
		}
	}
	if r := p.Retry; r.Enabled {
		switch {
		case r.InitialBackoff <= 0:
			return loc.errorf("connectors.retry.initial_backoff", nil, "must be more than 0 when retry.enabled = true")
		case r.MaxBackoff < r.InitialBackoff:
			return loc.errorf("connectors.retry.max_backoff", nil, "must not be less than initial_backoff (%s)", r.InitialBackoff)
		case r.BackoffMultiplier == 0:
			return loc.errorf("connectors.retry.backoff_multiplier", nil, "must be at least 1")
		}
	}
	return nil
}

// validHeaderName: a token of RFC 9110 (letters, digits and !#$%&'*+-.^_`|~).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue: no control character but horizontal tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// RedactURL returns raw with the password of its user info replaced by "xxxxx", for logs
// and errors; "(a URL that does not parse)" when it does not parse, since it may then
// hold a password that cannot be found.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}
