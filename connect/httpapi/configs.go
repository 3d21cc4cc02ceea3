package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
)

// The /{kind}s/{key}/configs routes: every config version the ConfigStore holds, each
// rendered redacted with "active" (the version the connector runs). The routes that read
// the running config (configs/active, configs/plugin) need no ConfigStore.

// errNoStore is the answer of a configs route that needs the ConfigStore when there is
// none.
func errNoStore() *apiError { return internalError("no connector config provider is configured") }

// withActive appends "active" to a rendered config object.
func withActive(obj []byte, active bool) (json.RawMessage, error) {
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, errors.New("rendered config is not a JSON object")
	}
	out := make([]byte, 0, len(obj)+16)
	out = append(out, obj[:len(obj)-1]...)
	if len(obj) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"active":`...)
	out = strconv.AppendBool(out, active)
	return append(out, '}'), nil
}

// rendered is one config version, rendered.
type rendered struct {
	version uint64
	obj     []byte
}

func renderSinks(list []*config.Sink) ([]rendered, error) {
	out := make([]rendered, 0, len(list))
	for _, c := range list {
		b, err := renderSink(c)
		if err != nil {
			return nil, err
		}
		out = append(out, rendered{c.Version, b})
	}
	return out, nil
}

func renderSources(list []*config.Source) ([]rendered, error) {
	out := make([]rendered, 0, len(list))
	for _, c := range list {
		b, err := renderSource(c)
		if err != nil {
			return nil, err
		}
		out = append(out, rendered{c.Version, b})
	}
	return out, nil
}

// storeError maps a ConfigStore error; version is what the request named (0 when none).
func storeError(kind, key string, version uint64, err error) *apiError {
	switch {
	case errors.Is(err, errConfigNotFound):
		return configNotFound(kind, key, version)
	case errors.Is(err, errInvalidConfig):
		return invalidConfig(err)
	case errors.Is(err, errProviderRequest):
		return &apiError{Status: http.StatusInternalServerError, Code: codeHTTPRequestFailed, Reason: err.Error()}
	}
	return internalError(err.Error())
}

// writeConfig answers one rendered config with "active".
func (s *Server) writeConfig(w http.ResponseWriter, r *http.Request, obj []byte, active bool) {
	out, err := withActive(obj, active)
	if err != nil {
		s.writeError(w, r, &apiError{Status: http.StatusInternalServerError, Code: codeJSONError, Reason: err.Error()})
		return
	}
	s.writeJSON(w, http.StatusOK, out)
}

// GET /{kind}s/{key}/configs: 404 unless the connector was started.
func (s *Server) listConfigs(w http.ResponseWriter, r *http.Request, kind string) {
	st, ok := s.connector(w, r, kind)
	if !ok {
		return
	}
	if s.configs == nil {
		s.writeError(w, r, errNoStore())
		return
	}
	var list []rendered
	var err error
	if kind == connect.KindSink {
		var cs []*config.Sink
		if cs, err = s.configs.SinkConfigs(st.Key); err == nil {
			list, err = renderSinks(cs)
		}
	} else {
		var cs []*config.Source
		if cs, err = s.configs.SourceConfigs(st.Key); err == nil {
			list, err = renderSources(cs)
		}
	}
	if err != nil {
		s.writeError(w, r, storeError(kind, st.Key, 0, err))
		return
	}
	out := make([]json.RawMessage, 0, len(list))
	for _, c := range list {
		b, err := withActive(c.obj, c.version == st.Version)
		if err != nil {
			s.writeError(w, r, &apiError{Status: http.StatusInternalServerError, Code: codeJSONError, Reason: err.Error()})
			return
		}
		out = append(out, b)
	}
	s.writeJSON(w, http.StatusOK, out)
}

// readJSONBody reads a JSON request body as axum's Json extractor does: 415 without a
// JSON Content-Type, 400 (plain text) when it is not JSON. ok false: answered.
func readJSONBody(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	if !isJSON(r) {
		rejectNotJSON(w)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		rejection(w, http.StatusBadRequest, "Failed to buffer the request body: "+err.Error())
		return nil, false
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		rejection(w, http.StatusBadRequest, "Failed to parse the request body as JSON: "+err.Error())
		return nil, false
	}
	if _, isObj := v.(map[string]any); !isObj {
		rejection(w, http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: expected a JSON object")
		return nil, false
	}
	return body, true
}

// POST /{kind}s/{key}/configs: body CreateSinkConfig / CreateSourceConfig; answers the
// new version with "active": false (not activated, not restarted).
func (s *Server) createConfig(w http.ResponseWriter, r *http.Request, kind string) {
	key := r.PathValue("key")
	body, ok := readJSONBody(w, r)
	if !ok {
		return
	}
	if s.configs == nil {
		s.writeError(w, r, errNoStore())
		return
	}
	var obj []byte
	var version uint64
	var err error
	if kind == connect.KindSink {
		var c *config.Sink
		if c, err = s.configs.CreateSink(key, body); err == nil {
			version = c.Version
			obj, err = renderSink(c)
		}
	} else {
		var c *config.Source
		if c, err = s.configs.CreateSource(key, body); err == nil {
			version = c.Version
			obj, err = renderSource(c)
		}
	}
	if err != nil {
		s.writeError(w, r, storeError(kind, key, 0, err))
		return
	}
	s.log.Info("http api: connector config created", "kind", kind, "key", key, "version", version)
	s.writeConfig(w, r, obj, false)
}

// parseVersion parses a {version} path segment or version query value as a u64.
func parseVersion(v string) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, errors.New("number too large to fit in target type")
		}
		return 0, errors.New("invalid digit found in string")
	}
	return n, nil
}

// DELETE /{kind}s/{key}/configs[?version=N] → 204; without version the active one.
func (s *Server) deleteConfig(w http.ResponseWriter, r *http.Request, kind string) {
	key := r.PathValue("key")
	var version *uint64
	if q := r.URL.Query(); q.Has("version") {
		v, err := parseVersion(q.Get("version"))
		if err != nil {
			rejection(w, http.StatusBadRequest, "Failed to deserialize query string: version: "+err.Error())
			return
		}
		version = &v
	}
	if s.configs == nil {
		s.writeError(w, r, errNoStore())
		return
	}
	var err error
	if kind == connect.KindSink {
		err = s.configs.DeleteSinkConfig(key, version)
	} else {
		err = s.configs.DeleteSourceConfig(key, version)
	}
	if err != nil {
		var v uint64
		if version != nil {
			v = *version
		}
		s.writeError(w, r, storeError(kind, key, v, err))
		return
	}
	s.log.Info("http api: connector config deleted", "kind", kind, "key", key)
	w.WriteHeader(http.StatusNoContent)
}

// GET /{kind}s/{key}/configs/{version}: 404 unless the connector was started; an unknown
// version is 500 *_config_not_found, as upstream.
func (s *Server) getConfig(w http.ResponseWriter, r *http.Request, kind string) {
	raw := r.PathValue("version")
	version, err := parseVersion(raw)
	if err != nil {
		rejection(w, http.StatusBadRequest, fmt.Sprintf("Invalid URL: Cannot parse value at index 1 with value `%s` to a `u64`", raw))
		return
	}
	st, ok := s.connector(w, r, kind)
	if !ok {
		return
	}
	if s.configs == nil {
		s.writeError(w, r, errNoStore())
		return
	}
	var obj []byte
	if kind == connect.KindSink {
		var c *config.Sink
		if c, err = s.configs.SinkConfig(st.Key, version); err == nil {
			obj, err = renderSink(c)
		}
	} else {
		var c *config.Source
		if c, err = s.configs.SourceConfig(st.Key, version); err == nil {
			obj, err = renderSource(c)
		}
	}
	if err != nil {
		s.writeError(w, r, storeError(kind, st.Key, version, err))
		return
	}
	s.writeConfig(w, r, obj, version == st.Version)
}

// GET /{kind}s/{key}/configs/active: the config the connector runs, "active": true.
func (s *Server) getActiveConfig(w http.ResponseWriter, r *http.Request, kind string) {
	st, ok := s.connector(w, r, kind)
	if !ok {
		return
	}
	var obj []byte
	var err error
	switch {
	case st.Sink != nil:
		obj, err = renderSink(st.Sink)
	case st.Source != nil:
		obj, err = renderSource(st.Source)
	default:
		s.writeError(w, r, notFound(kind, st.Key))
		return
	}
	if err != nil {
		s.writeError(w, r, &apiError{Status: http.StatusInternalServerError, Code: codeJSONError, Reason: err.Error()})
		return
	}
	s.writeConfig(w, r, obj, true)
}

// PUT /{kind}s/{key}/configs/active, body {"version": N} → 204: recorded, no restart.
func (s *Server) setActiveConfig(w http.ResponseWriter, r *http.Request, kind string) {
	key := r.PathValue("key")
	body, ok := readJSONBody(w, r)
	if !ok {
		return
	}
	var b struct {
		Version *uint64 `json:"version"`
	}
	if err := json.Unmarshal(body, &b); err != nil || b.Version == nil {
		msg := "missing field `version`"
		if err != nil {
			msg = "version: expected u64"
		}
		rejection(w, http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: "+msg)
		return
	}
	if s.configs == nil {
		s.writeError(w, r, errNoStore())
		return
	}
	var err error
	if kind == connect.KindSink {
		err = s.configs.SetActiveSink(key, *b.Version)
	} else {
		err = s.configs.SetActiveSource(key, *b.Version)
	}
	if err != nil {
		s.writeError(w, r, storeError(kind, key, *b.Version, err))
		return
	}
	s.log.Info("http api: active connector config set", "kind", kind, "key", key, "version", *b.Version)
	w.WriteHeader(http.StatusNoContent)
}

// GET /{kind}s/{key}/configs/plugin[?format=json|yaml|toml|text]: the running plugin
// config (redacted) in that format; 404 with an empty body when there is none.
func (s *Server) getPluginConfig(w http.ResponseWriter, r *http.Request, kind string) {
	format := r.URL.Query().Get("format")
	switch format {
	case "", "json", "yaml", "toml", "text":
	default:
		rejection(w, http.StatusBadRequest, fmt.Sprintf("Failed to deserialize query string: format: unknown variant `%s`, expected one of `json`, `yaml`, `toml`, `text`", format))
		return
	}
	st, ok := s.connector(w, r, kind)
	if !ok {
		return
	}
	c := common(&st)
	if c == nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	body, contentType, err := renderPluginConfig(c, format)
	if errors.Is(err, errNoPluginConfig) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if err != nil {
		s.log.Error("http api: render plugin_config", "kind", kind, "key", st.Key, "format", format, "error", err)
		s.writeError(w, r, &apiError{Status: http.StatusBadRequest, Code: codeError, Reason: "Cannot convert configuration"})
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
