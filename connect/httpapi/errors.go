package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/ferryio/ferry/connect"
)

// Error codes of the {"code","reason"} answers: Iggy's, then Ferry's.
const (
	codeSinkNotFound         = "sink_not_found"
	codeSourceNotFound       = "source_not_found"
	codeSinkConfigNotFound   = "sink_config_not_found"
	codeSourceConfigNotFound = "source_config_not_found"
	codeInvalidConfiguration = "invalid_configuration"
	codeJSONError            = "json_error"
	codeHTTPRequestFailed    = "http_request_failed" // a remote config provider failed
	codeError                = "error"
	codeSinkNotStopped       = "sink_not_stopped"
	codeSinkNotRunning       = "sink_not_running"
	codeRewindRefused        = "rewind_refused" // PUT offsets on a sink whose target keeps positions it cannot set
)

// apiError is one {"code","reason"} answer with its status.
type apiError struct {
	Status int    `json:"-"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Reason }

// title is the kind as Iggy's messages spell it.
func title(kind string) string {
	if kind == connect.KindSource {
		return "Source"
	}
	return "Sink"
}

func notFound(kind, key string) *apiError {
	code := codeSinkNotFound
	if kind == connect.KindSource {
		code = codeSourceNotFound
	}
	return &apiError{Status: http.StatusNotFound, Code: code, Reason: fmt.Sprintf("%s not found with key: %s", title(kind), key)}
}

// configNotFound is Iggy's answer to an unknown config version: 500, as upstream [quirk].
func configNotFound(kind, key string, version uint64) *apiError {
	code := codeSinkConfigNotFound
	if kind == connect.KindSource {
		code = codeSourceConfigNotFound
	}
	return &apiError{Status: http.StatusInternalServerError, Code: code,
		Reason: fmt.Sprintf("%s config not found with key: %s, version: %d", title(kind), key, version)}
}

func invalidConfig(err error) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: codeInvalidConfiguration, Reason: "Invalid configuration: " + err.Error()}
}

func internalError(reason string) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Code: codeError, Reason: reason}
}

// runtimeError maps an error of a connect.Runtime control method to its answer.
func runtimeError(kind, key string, err error) *apiError {
	switch {
	case errors.Is(err, connect.ErrNotFound), errors.Is(err, connect.ErrNotSink):
		// ErrNotSink: a source's key under /sinks/ names no sink.
		return notFound(kind, key)
	case errors.Is(err, connect.ErrNotStopped):
		return &apiError{Status: http.StatusConflict, Code: codeSinkNotStopped, Reason: fmt.Sprintf("Sink is not stopped: %s", key)}
	case errors.Is(err, connect.ErrNotRunning):
		return &apiError{Status: http.StatusConflict, Code: codeSinkNotRunning, Reason: fmt.Sprintf("Sink is not running: %s", key)}
	case errors.Is(err, connect.ErrRewindRefused):
		// The sink resumes from its target: storing Iggy's offsets alone would change nothing.
		return &apiError{Status: http.StatusConflict, Code: codeRewindRefused, Reason: err.Error()}
	case errors.Is(err, connect.ErrInvalidOffsets):
		// PUT offsets naming a stream or topic the sink does not consume: the body's fault.
		return invalidConfig(err)
	}
	return internalError(err.Error())
}

// writeJSON answers status with v as JSON.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("http api: encode answer", "error", err)
		b, _ = json.Marshal(&apiError{Code: codeJSONError, Reason: err.Error()})
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeError answers e as JSON and logs it: a server error at ERROR, a client's mistake
// (an unknown key, a conflict) at DEBUG.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, e *apiError) {
	lv := slog.LevelDebug
	if e.Status >= 500 {
		lv = slog.LevelError
	}
	s.log.Log(r.Context(), lv, "http api: request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "code", e.Code, "reason", e.Reason)
	s.writeJSON(w, e.Status, e)
}

// rejection answers an extractor failure as axum does: a status and a plain-text body.
func rejection(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg))
}
