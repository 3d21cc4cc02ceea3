package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/ferryio/ferry/connect"
)

// reloader is the runtime's reload (*connect.Runtime implements it); a Runtime without it
// answers POST /reload 501.
type reloader interface {
	Reload(ctx context.Context) (connect.ReloadResult, error)
}

// reloadJSON is the answer of POST /reload: what the reload did, connector by connector
// ("sink KEY", "source KEY"), and the files it refused with their errors.
type reloadJSON struct {
	Started   []string      `json:"started"`
	Restarted []string      `json:"restarted"`
	Stopped   []string      `json:"stopped"`
	Unchanged []string      `json:"unchanged"`
	Refused   []refusedJSON `json:"refused"`
}

type refusedJSON struct {
	Type  string `json:"type,omitempty"`
	Key   string `json:"key,omitempty"`
	File  string `json:"file"`
	Error string `json:"error"`
}

// POST /reload (Ferry) → 200 reloadJSON: the connector files re-read and applied, as
// SIGHUP does. A refused file does not fail the request: the connector it names keeps
// running its old config, and the file is listed under refused. 501 when the runtime
// cannot reload, 500 when the config_dir cannot be read or the runtime stopped.
func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	rl, ok := s.rt.(reloader)
	if !ok {
		s.writeError(w, r, &apiError{Status: http.StatusNotImplemented, Code: codeError, Reason: "this runtime cannot reload"})
		return
	}
	res, err := rl.Reload(context.WithoutCancel(r.Context()))
	if errors.Is(err, connect.ErrNoReload) {
		s.writeError(w, r, &apiError{Status: http.StatusNotImplemented, Code: codeError, Reason: err.Error()})
		return
	}
	if err != nil {
		s.writeError(w, r, internalError(err.Error()))
		return
	}
	out := reloadJSON{Started: nonNil(res.Started), Restarted: nonNil(res.Restarted), Stopped: nonNil(res.Stopped),
		Unchanged: nonNil(res.Unchanged), Refused: []refusedJSON{}}
	for _, f := range res.Refused {
		out.Refused = append(out.Refused, refusedJSON{Type: f.Kind, Key: f.Key, File: f.File, Error: f.Error})
	}
	s.log.Info("http api: connectors reloaded", "started", len(out.Started), "restarted", len(out.Restarted),
		"stopped", len(out.Stopped), "refused", len(out.Refused))
	s.writeJSON(w, http.StatusOK, out)
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
