package httpapi

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
)

// failing is the real runtime whose control methods all return err: the error mapping
// of every control route, independent of when the runtime returns which error.
type failing struct {
	filled
	err error
}

func (f failing) Restart(context.Context, string, string) error       { return f.err }
func (f failing) StopConnector(context.Context, string, string) error { return f.err }
func (f failing) Pause(string, string) error                          { return f.err }
func (f failing) Resume(string, string) error                         { return f.err }
func (f failing) Offsets(context.Context, string) ([]connect.PartitionOffsets, error) {
	return nil, f.err
}
func (f failing) SetOffsets(context.Context, string, []connect.OffsetChange) error { return f.err }

const offsetsBody1 = `{"offsets":[{"stream":"s1","topic":"t1","partition_id":0,"offset":4}]}`

var controlRoutes = []struct{ method, path, body, kind, key string }{
	{"POST", "/sinks/nsink/restart", "", "sink", "nsink"},
	{"POST", "/sources/gen/restart", "", "source", "gen"},
	{"POST", "/sinks/nsink/stop", "", "sink", "nsink"},
	{"POST", "/sources/gen/stop", "", "source", "gen"},
	{"POST", "/sinks/nsink/pause", "", "sink", "nsink"},
	{"POST", "/sinks/nsink/resume", "", "sink", "nsink"},
	{"GET", "/sinks/nsink/offsets", "", "sink", "nsink"},
	{"PUT", "/sinks/nsink/offsets", offsetsBody1, "sink", "nsink"},
}

func TestControlErrors(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		err                  error
		status               int
		sinkCode, sourceCode string
		sinkReason           string
	}{
		{connect.ErrNotFound, http.StatusNotFound, "sink_not_found", "source_not_found", "Sink not found with key: nsink"},
		{connect.ErrNotSink, http.StatusNotFound, "sink_not_found", "source_not_found", "Sink not found with key: nsink"},
		{connect.ErrNotStopped, http.StatusConflict, "sink_not_stopped", "sink_not_stopped", "Sink is not stopped: nsink"},
		{connect.ErrNotRunning, http.StatusConflict, "sink_not_running", "sink_not_running", "Sink is not running: nsink"},
		{errors.New("boom"), http.StatusInternalServerError, "error", "error", "boom"},
		{errors.ErrUnsupported, http.StatusInternalServerError, "error", "error", "unsupported operation"},
	} {
		a := serveOpts(t, Options{Runtime: failing{e.api.(filled), tc.err}, HTTP: httpLoopback(), Logger: quietLog})
		for _, rt := range controlRoutes {
			code, reason := tc.sinkCode, tc.sinkReason
			if rt.kind == "source" {
				code = tc.sourceCode
				if tc.status == http.StatusNotFound {
					reason = "Source not found with key: gen"
				}
				if tc.status == http.StatusConflict {
					continue // no source route answers these
				}
			}
			t.Run(tc.err.Error()+" "+rt.method+" "+rt.path, func(t *testing.T) {
				a.do(rt.method, rt.path, rt.body).wantError(t, tc.status, code, reason)
			})
		}
	}
}

func TestSetOffsetsBody(t *testing.T) {
	a := newEnv(t).serve(nil)
	for _, tc := range []struct{ body, reason string }{
		{`{"offsets":[]}`, "offsets: at least one entry is required"},
		{`{}`, "offsets: at least one entry is required"},
		{`{"offsets":[{"topic":"t1","partition_id":0,"offset":4}]}`, "offsets[0].stream is required"},
		{`{"offsets":[{"stream":"s1","partition_id":0,"offset":4}]}`, "offsets[0].topic is required"},
		{`{"offsets":[{"stream":"s1","topic":"t1","offset":4}]}`, "offsets[0].partition_id is required"},
		{`{"offsets":[{"stream":"s1","topic":"t1","partition_id":0}]}`, "offsets[0].offset is required"},
		{`{"offsets":[{"stream":"s1","topic":"t1","partition_id":0,"offset":-1}]}`,
			"offsets body: json: cannot unmarshal number -1 into Go struct field .offsets.offset of type uint64"},
		{`{"offsets":[],"extra":1}`, `offsets body: json: unknown field "extra"`},
		{`{"offsets":`, "offsets body: unexpected EOF"},
		{`{"offsets":[]} {}`, "offsets body: trailing data after the object"},
	} {
		a.do("PUT", "/sinks/nsink/offsets", tc.body).wantError(t, http.StatusBadRequest, "invalid_configuration",
			"Invalid configuration: "+tc.reason)
	}
}

// The tests below exercise the control methods of connect.Runtime through the API, as
// the contract describes them; they skip themselves while those methods are stubs.

func TestPauseResume(t *testing.T) {
	e := newEnv(t)
	needsControl(t, e.rt.Pause(connect.KindSink, "no-such-sink"))
	a := e.serve(nil)
	a.do("POST", "/sinks/nsink/pause", "").want(t, http.StatusNoContent)
	if m := a.do("GET", "/sinks/nsink/status", "").want(t, http.StatusOK).object(t); m["paused"] != true {
		t.Fatalf("status after pause: %v", m)
	}
	a.do("POST", "/sinks/nsink/resume", "").want(t, http.StatusNoContent)
	if m := a.do("GET", "/sinks/nsink/status", "").want(t, http.StatusOK).object(t); m["paused"] != false {
		t.Fatalf("status after resume: %v", m)
	}
	a.do("POST", "/sinks/nope/pause", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
	a.do("POST", "/sinks/nope/resume", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
}

func TestOffsets(t *testing.T) {
	e := newEnv(t)
	_, probe := e.rt.Offsets(context.Background(), "no-such-sink")
	needsControl(t, probe)
	a := e.serve(nil)
	e.fill(10)
	waitFor(t, 10*time.Second, "nsink polled everything", func() bool {
		st, _ := e.rt.Connector("sink", "nsink")
		return st.Stats.Polled == 10
	})
	list := a.do("GET", "/sinks/nsink/offsets", "").want(t, http.StatusOK).array(t)
	if len(list) != 1 {
		t.Fatalf("offsets = %v", list)
	}
	o := list[0]
	wantKeys(t, "offsets", o, "stream", "topic", "partition_id", "current_offset", "stored_offset", "lag", "uncommitted", "owned")
	if o["stream"] != "s1" || o["topic"] != "t1" || o["partition_id"] != 0.0 || o["current_offset"] != 9.0 || o["owned"] != true {
		t.Fatalf("offsets = %v", o)
	}
	a.do("GET", "/sinks/nope/offsets", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
	a.do("GET", "/sinks/gen/offsets", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: gen")
}

func TestStopSetOffsetsRestart(t *testing.T) {
	e := newEnv(t)
	needsControl(t, e.rt.StopConnector(context.Background(), connect.KindSink, "no-such-sink"))
	a := e.serve(nil)
	e.fill(10)
	waitFor(t, 10*time.Second, "nsink polled everything", func() bool {
		st, _ := e.rt.Connector("sink", "nsink")
		return st.Stats.Polled == 10
	})
	a.do("PUT", "/sinks/nsink/offsets", offsetsBody1).wantError(t, http.StatusConflict, "sink_not_stopped", "Sink is not stopped: nsink")

	before := a.do("GET", "/sinks/nsink", "").want(t, http.StatusOK).object(t)
	a.do("POST", "/sinks/nsink/stop", "").want(t, http.StatusNoContent)
	if m := a.do("GET", "/sinks/nsink", "").want(t, http.StatusOK).object(t); m["status"] != "stopped" {
		t.Fatalf("status after stop = %v", m["status"])
	}
	a.do("POST", "/sinks/nsink/pause", "").wantError(t, http.StatusConflict, "sink_not_running", "Sink is not running: nsink")
	a.do("PUT", "/sinks/nsink/offsets", offsetsBody1).want(t, http.StatusNoContent)
	list := a.do("GET", "/sinks/nsink/offsets", "").want(t, http.StatusOK).array(t)
	if len(list) != 1 || list[0]["stored_offset"] != 4.0 || list[0]["current_offset"] != 9.0 || list[0]["lag"] != 5.0 {
		t.Fatalf("offsets after set = %v", list)
	}

	a.do("POST", "/sinks/nsink/restart", "").want(t, http.StatusNoContent)
	waitFor(t, 10*time.Second, "nsink running again", func() bool {
		st, _ := e.rt.Connector("sink", "nsink")
		return st.State == connect.StateRunning
	})
	after := a.do("GET", "/sinks/nsink", "").want(t, http.StatusOK).object(t)
	if after["id"] == before["id"] {
		t.Fatalf("id %v unchanged by the restart", after["id"])
	}
	// It resumes after the stored offset (5..9 again) and stores the last one.
	waitFor(t, 10*time.Second, "nsink consumed to the end again", func() bool {
		l := a.do("GET", "/sinks/nsink/offsets", "").want(t, http.StatusOK).array(t)
		return len(l) == 1 && l[0]["stored_offset"] == 9.0 && l[0]["lag"] == 0.0
	})
	a.do("POST", "/sinks/nope/stop", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
	a.do("POST", "/sinks/nope/restart", "").wantError(t, http.StatusNotFound, "sink_not_found", "Sink not found with key: nope")
}

func TestRestartSource(t *testing.T) {
	e := newEnv(t)
	needsControl(t, e.rt.Restart(context.Background(), connect.KindSource, "no-such-source"))
	a := e.serve(nil)
	before, _ := e.rt.Connector("source", "gen")
	a.do("POST", "/sources/gen/restart", "").want(t, http.StatusNoContent)
	waitFor(t, 10*time.Second, "gen running again", func() bool {
		st, _ := e.rt.Connector("source", "gen")
		return st.State == connect.StateRunning && st.ID != before.ID
	})
	a.do("POST", "/sources/gen/stop", "").want(t, http.StatusNoContent)
	if m := a.do("GET", "/sources/gen", "").want(t, http.StatusOK).object(t); m["status"] != "stopped" {
		t.Fatalf("source after stop: %v", m)
	}
	a.do("POST", "/sources/nope/restart", "").wantError(t, http.StatusNotFound, "source_not_found", "Source not found with key: nope")
}
