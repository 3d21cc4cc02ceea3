package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/configjson"
	"github.com/ferryio/ferry/sdk"
)

// lastErrorJSON is Iggy's ConnectorError: the timestamp in µs since the epoch.
type lastErrorJSON struct {
	Message   string `json:"message"`
	Timestamp int64  `json:"timestamp"`
}

func lastError(le *connect.LastError) *lastErrorJSON {
	if le == nil {
		return nil
	}
	return &lastErrorJSON{Message: le.Message, Timestamp: le.Timestamp.UnixMicro()}
}

// infoJSON is Iggy's SinkInfoResponse / SourceInfoResponse.
type infoJSON struct {
	ID                 uint32         `json:"id"`
	Key                string         `json:"key"`
	Name               string         `json:"name"`
	Path               string         `json:"path"`
	Enabled            bool           `json:"enabled"`
	Status             string         `json:"status"`
	LastError          *lastErrorJSON `json:"last_error,omitempty"`
	PluginConfigFormat string         `json:"plugin_config_format,omitempty"`
}

// common returns the configuration the connector runs (nil when the status has none).
func common(st *connect.Status) *config.Common {
	switch {
	case st.Sink != nil:
		return &st.Sink.Common
	case st.Source != nil:
		return &st.Source.Common
	}
	return nil
}

func infoOf(st *connect.Status) infoJSON {
	out := infoJSON{ID: st.ID, Key: st.Key, Name: st.Name, Path: st.Path, Enabled: st.Enabled,
		Status: string(st.State), LastError: lastError(st.LastError)}
	if c := common(st); c != nil {
		out.PluginConfigFormat = c.PluginConfigFormat
	}
	return out
}

// connector finds the started connector of the request's {key}, or answers 404.
func (s *Server) connector(w http.ResponseWriter, r *http.Request, kind string) (connect.Status, bool) {
	key := r.PathValue("key")
	st, ok := s.rt.Connector(kind, key)
	if !ok {
		s.writeError(w, r, notFound(kind, key))
	}
	return st, ok
}

// GET /sinks, GET /sources: every started connector of the kind, by key.
func (s *Server) listConnectors(w http.ResponseWriter, _ *http.Request, kind string) {
	out := []infoJSON{}
	for _, st := range s.rt.Status() {
		if st.Kind == kind {
			out = append(out, infoOf(&st))
		}
	}
	s.writeJSON(w, http.StatusOK, out)
}

// GET /sinks/{key}, GET /sources/{key}: the info and the streams it runs.
func (s *Server) getConnector(w http.ResponseWriter, r *http.Request, kind string) {
	st, ok := s.connector(w, r, kind)
	if !ok {
		return
	}
	var streams any = []configjson.SinkStreamJSON{}
	switch {
	case st.Sink != nil:
		streams = configjson.SinkJSON(st.Sink).Streams
	case st.Source != nil:
		streams = configjson.SourceJSON(st.Source).Streams
	case kind == connect.KindSource:
		streams = []configjson.SourceStreamJSON{}
	}
	s.writeJSON(w, http.StatusOK, struct {
		infoJSON
		Streams any `json:"streams"`
	}{infoOf(&st), streams})
}

type transformJSON struct {
	Type   string         `json:"type"`
	Config map[string]any `json:"config"`
}

// GET /{kind}s/{key}/transforms: [{"type","config"}], [] when none.
func (s *Server) getTransforms(w http.ResponseWriter, r *http.Request, kind string) {
	st, ok := s.connector(w, r, kind)
	if !ok {
		return
	}
	out := []transformJSON{}
	if c := common(&st); c != nil {
		for _, t := range c.Transforms {
			out = append(out, transformJSON{Type: t.Type, Config: t.Config})
		}
	}
	s.writeJSON(w, http.StatusOK, out)
}

// POST /{kind}s/{key}/restart → 204. The restart is not cut short when the client goes
// away: a half-done restart would leave the connector stopped.
func (s *Server) restart(w http.ResponseWriter, r *http.Request, kind string) {
	key := r.PathValue("key")
	noWriteDeadline(w) // waits up to the connector's shutdown_timeout
	if err := s.rt.Restart(context.WithoutCancel(r.Context()), kind, key); err != nil {
		s.writeError(w, r, runtimeError(kind, key, err))
		return
	}
	s.log.Info("http api: connector restarted", "kind", kind, "key", key)
	w.WriteHeader(http.StatusNoContent)
}

// POST /{kind}s/{key}/stop → 204: stopped until a restart.
func (s *Server) stop(w http.ResponseWriter, r *http.Request, kind string) {
	key := r.PathValue("key")
	noWriteDeadline(w) // waits up to the connector's shutdown_timeout
	if err := s.rt.StopConnector(context.WithoutCancel(r.Context()), kind, key); err != nil {
		s.writeError(w, r, runtimeError(kind, key, err))
		return
	}
	s.log.Info("http api: connector stopped", "kind", kind, "key", key)
	w.WriteHeader(http.StatusNoContent)
}

// POST /sinks/{key}/pause → 204; 409 sink_not_running.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := s.rt.Pause(connect.KindSink, key); err != nil {
		s.writeError(w, r, runtimeError(connect.KindSink, key, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// POST /sinks/{key}/resume → 204; 409 sink_not_running.
func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := s.rt.Resume(connect.KindSink, key); err != nil {
		s.writeError(w, r, runtimeError(connect.KindSink, key, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// offsetJSON is one partition of GET /sinks/{key}/offsets; offsets are null when none.
type offsetJSON struct {
	Stream        string `json:"stream"`
	Topic         string `json:"topic"`
	PartitionID   uint32 `json:"partition_id"`
	CurrentOffset *int64 `json:"current_offset"`
	StoredOffset  *int64 `json:"stored_offset"`
	Lag           uint64 `json:"lag"`
	Uncommitted   uint64 `json:"uncommitted"`
	Owned         bool   `json:"owned"`
	// Only while the partition's offset stores fail (left out when they succeed).
	StoreFailures  int            `json:"store_failures,omitempty"`
	LastStoreError *lastErrorJSON `json:"last_store_error,omitempty"`
	OffsetsAgeMs   *int64         `json:"offsets_age_ms,omitempty"`
	// Only for a sink that keeps its positions in its target: the last offset the target
	// holds (null: none), where the sink resumes, or why the target could not be read.
	TargetOffset json.RawMessage `json:"target_offset,omitempty"`
	ResumesFrom  string          `json:"resumes_from,omitempty"`
	TargetError  string          `json:"target_error,omitempty"`
}

// targetOffset is offsetJSON.TargetOffset: left out for a sink that keeps no positions
// or whose target could not be read, null when the target holds none.
func targetOffset(o connect.PartitionOffsets) json.RawMessage {
	switch {
	case !o.KeepsPositions || o.TargetError != "":
		return nil
	case o.Target < 0:
		return json.RawMessage("null")
	}
	return strconv.AppendInt(nil, o.Target, 10)
}

func offsetOrNull(o int64) *int64 {
	if o < 0 {
		return nil
	}
	return &o
}

// ageMs is how old, in milliseconds, a read of Iggy's offsets that began at is: the
// runtime answers a kept read while it reads again (connect.Runtime.SinkPartitions).
// nil when the figures are not Iggy's (at is zero).
func ageMs(at time.Time) *int64 {
	if at.IsZero() {
		return nil
	}
	ms := max(time.Since(at).Milliseconds(), 0)
	return &ms
}

// GET /sinks/{key}/offsets.
func (s *Server) getOffsets(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	offs, err := s.rt.Offsets(r.Context(), key)
	if err != nil {
		s.writeError(w, r, runtimeError(connect.KindSink, key, err))
		return
	}
	out := make([]offsetJSON, 0, len(offs))
	for _, o := range offs {
		out = append(out, offsetJSON{Stream: o.Stream, Topic: o.Topic, PartitionID: o.Partition,
			CurrentOffset: offsetOrNull(o.Current), StoredOffset: offsetOrNull(o.Stored),
			Lag: o.Lag, Uncommitted: o.Uncommitted, Owned: o.Owned,
			StoreFailures: o.StoreFailures, LastStoreError: lastError(o.StoreError), OffsetsAgeMs: ageMs(o.ReadAt),
			TargetOffset: targetOffset(o), ResumesFrom: o.ResumesFrom, TargetError: o.TargetError})
	}
	s.writeJSON(w, http.StatusOK, out)
}

// offsetsBody is the body of PUT /sinks/{key}/offsets; every field is required.
type offsetsBody struct {
	Offsets []struct {
		Stream      *string `json:"stream"`
		Topic       *string `json:"topic"`
		PartitionID *uint32 `json:"partition_id"`
		Offset      *uint64 `json:"offset"`
	} `json:"offsets"`
}

// maxBody bounds every request body the API reads.
const maxBody = 1 << 20

// PUT /sinks/{key}/offsets → 204; 409 sink_not_stopped; 415 without a JSON Content-Type;
// 400 invalid_configuration on a bad body (Ferry's route: a JSON error, not a plain-text
// rejection).
func (s *Server) putOffsets(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if !isJSON(r) {
		rejectNotJSON(w)
		return
	}
	changes, err := parseOffsets(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		s.writeError(w, r, invalidConfig(err))
		return
	}
	if err := s.rt.SetOffsets(context.WithoutCancel(r.Context()), key, changes); err != nil {
		s.writeError(w, r, runtimeError(connect.KindSink, key, err))
		return
	}
	s.log.Info("http api: sink offsets set", "key", key, "partitions", len(changes))
	w.WriteHeader(http.StatusNoContent)
}

func parseOffsets(body io.Reader) ([]connect.OffsetChange, error) {
	var b offsetsBody
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("offsets body: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("offsets body: trailing data after the object")
	}
	if len(b.Offsets) == 0 {
		return nil, fmt.Errorf("offsets: at least one entry is required")
	}
	out := make([]connect.OffsetChange, 0, len(b.Offsets))
	// A partition named twice would leave which offset wins to the order of the list.
	seen := make(map[connect.OffsetChange]int, len(b.Offsets))
	for i, o := range b.Offsets {
		switch {
		case o.Stream == nil || *o.Stream == "":
			return nil, fmt.Errorf("offsets[%d].stream is required", i)
		case o.Topic == nil || *o.Topic == "":
			return nil, fmt.Errorf("offsets[%d].topic is required", i)
		case o.PartitionID == nil:
			return nil, fmt.Errorf("offsets[%d].partition_id is required", i)
		case o.Offset == nil:
			return nil, fmt.Errorf("offsets[%d].offset is required", i)
		}
		part := connect.OffsetChange{Stream: *o.Stream, Topic: *o.Topic, Partition: *o.PartitionID}
		if j, dup := seen[part]; dup {
			return nil, fmt.Errorf("offsets[%d] and offsets[%d] both name stream %q topic %q partition %d: name each partition once",
				j, i, part.Stream, part.Topic, part.Partition)
		}
		seen[part] = i
		part.Offset = *o.Offset
		out = append(out, part)
	}
	return out, nil
}

// restartJSON is a connector's supervision state in /{kind}s/{key}/status.
type restartJSON struct {
	Restarts    uint32 `json:"restarts"`
	Total       uint64 `json:"total"`
	MaxRestarts uint32 `json:"max_restarts"`
	NextRetry   *int64 `json:"next_retry"`
	GaveUp      bool   `json:"gave_up"`
	// WaitingForPlugin: not reopened until the stopped instance's hung plugin call returns.
	WaitingForPlugin bool `json:"waiting_for_plugin"`
}

type sinkStatsJSON struct {
	Polled          uint64 `json:"polled"`
	Delivered       uint64 `json:"delivered"`
	Committed       uint64 `json:"committed"`
	ConsumeErrors   uint64 `json:"consume_errors"`
	FailedBatches   uint64 `json:"failed_batches"`
	DeadLettered    uint64 `json:"dead_lettered"`
	Skipped         uint64 `json:"skipped"`
	Stores          uint64 `json:"stores"`
	StoreErrors     uint64 `json:"store_errors"`
	StoresRefused   uint64 `json:"stores_refused"`
	CommitsAccepted uint64 `json:"commits_accepted"`
	CommitsRejected uint64 `json:"commits_rejected"`
	Retries         uint64 `json:"retries"`
	Filtered        uint64 `json:"filtered"`
	Decoded         uint64 `json:"decoded"`
	DecodeErrors    uint64 `json:"decode_errors"`
	TransformErrors uint64 `json:"transform_errors"`
	PollErrors      uint64 `json:"poll_errors"`
	TopicsRecreated uint64 `json:"topics_recreated"`
	// PartitionRewinds: partitions found gone back to an earlier offset (purged).
	PartitionRewinds uint64 `json:"partition_rewinds"`
	Errors           uint64 `json:"errors"` // as Iggy's /stats and iggy_connector_errors_total count them
}

type sourceStatsJSON struct {
	Produced        uint64 `json:"produced"`
	Sent            uint64 `json:"sent"`
	Acked           uint64 `json:"acked"`
	SendErrors      uint64 `json:"send_errors"`
	FailedBatches   uint64 `json:"failed_batches"`
	Retries         uint64 `json:"retries"`
	StateErrors     uint64 `json:"state_errors"`
	DeadLettered    uint64 `json:"dead_lettered"`
	Skipped         uint64 `json:"skipped"`
	DecodeErrors    uint64 `json:"decode_errors"`
	TransformErrors uint64 `json:"transform_errors"`
	Errors          uint64 `json:"errors"`
}

type partitionJSON struct {
	Stream        string `json:"stream"`
	Topic         string `json:"topic"`
	PartitionID   uint32 `json:"partition_id"`
	State         string `json:"state"`
	Polled        int64  `json:"polled"`
	Delivered     int64  `json:"delivered"`
	Done          int64  `json:"done"`
	Stored        int64  `json:"stored"`
	CurrentOffset int64  `json:"current_offset"`
	Lag           uint64 `json:"lag"`
	Pending       uint64 `json:"pending"`
	Uncommitted   uint64 `json:"uncommitted"`
	Paused        bool   `json:"paused"`
	// Only while the partition's offset stores fail (left out when they succeed).
	StoreFailures  int            `json:"store_failures,omitempty"`
	LastStoreError *lastErrorJSON `json:"last_store_error,omitempty"`
	// How old Iggy's figures are; left out when the partition's are the sink's alone.
	OffsetsAgeMs *int64 `json:"offsets_age_ms,omitempty"`
}

// statusHead is what the status of both kinds starts with.
type statusHead struct {
	Key    string `json:"key"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	ID     uint32 `json:"id"`
	Status string `json:"status"`
}

// gaugesJSON maps a connector's own figures by name (nil: none).
func gaugesJSON(gs []sdk.Gauge) map[string]uint64 {
	if len(gs) == 0 {
		return nil
	}
	out := make(map[string]uint64, len(gs))
	for _, g := range gs {
		out[g.Name] = g.Value
	}
	return out
}

// GET /{kind}s/{key}/status: Ferry's full view of one connector.
func (s *Server) getStatus(w http.ResponseWriter, r *http.Request, kind string) {
	st, ok := s.connector(w, r, kind)
	if !ok {
		return
	}
	head := statusHead{Key: st.Key, Kind: st.Kind, Name: st.Name, ID: st.ID, Status: string(st.State)}
	rs := restartJSON{Restarts: st.Restart.Restarts, Total: st.Restart.Total, MaxRestarts: st.Restart.MaxRestarts, GaveUp: st.Restart.GaveUp,
		WaitingForPlugin: st.Restart.WaitingForPlugin}
	if !st.Restart.NextRetry.IsZero() {
		us := st.Restart.NextRetry.UnixMicro()
		rs.NextRetry = &us
	}
	x := st.Stats
	if kind == connect.KindSource {
		s.writeJSON(w, http.StatusOK, struct {
			statusHead
			LastError *lastErrorJSON    `json:"last_error,omitempty"`
			Restart   restartJSON       `json:"restart"`
			Stats     sourceStatsJSON   `json:"stats"`
			Gauges    map[string]uint64 `json:"gauges,omitempty"`
		}{head, lastError(st.LastError), rs, sourceStatsJSON{Produced: x.Produced, Sent: x.Sent, Acked: x.Committed,
			SendErrors: x.SendErrors, FailedBatches: x.FailedBatches, Retries: x.Retries, StateErrors: x.StoreErrors,
			DeadLettered: x.DeadLettered, Skipped: x.Skipped, DecodeErrors: x.DecodeErrors, TransformErrors: x.TransformErrors,
			Errors: x.Errors()}, gaugesJSON(st.Gauges)})
		return
	}
	// Every partition of its topics, in every state, with Iggy's offsets; a topic Iggy
	// could not answer for keeps the sink's own view, and the reason is given.
	all, err := s.rt.SinkPartitions(r.Context(), st)
	offsetsErr := ""
	if err != nil {
		offsetsErr = err.Error()
		s.log.Debug("http api: sink offsets not read", "key", st.Key, "error", err)
	}
	parts := make([]partitionJSON, 0, len(all))
	for _, p := range all {
		parts = append(parts, partitionJSON{Stream: p.Stream, Topic: p.Topic, PartitionID: p.Partition, State: p.State,
			Polled: p.Polled, Delivered: p.Delivered, Done: p.Done, Stored: p.Stored, CurrentOffset: p.Current,
			Lag: p.Lag, Pending: p.Pending, Uncommitted: p.Uncommitted, Paused: p.Paused,
			StoreFailures: p.StoreFailures, LastStoreError: lastError(p.StoreError), OffsetsAgeMs: ageMs(p.ReadAt)})
	}
	s.writeJSON(w, http.StatusOK, struct {
		statusHead
		Paused     bool            `json:"paused"`
		LastError  *lastErrorJSON  `json:"last_error,omitempty"`
		Restart    restartJSON     `json:"restart"`
		Stats      sinkStatsJSON   `json:"stats"`
		Partitions []partitionJSON `json:"partitions"`
		OffsetsErr string          `json:"offsets_error,omitempty"`
	}{head, st.Paused, lastError(st.LastError), rs, sinkStatsJSON{Polled: x.Polled, Delivered: x.Delivered, Committed: x.Committed,
		ConsumeErrors: x.ConsumeErrors, FailedBatches: x.FailedBatches, DeadLettered: x.DeadLettered, Skipped: x.Skipped,
		Stores: x.Stores, StoreErrors: x.StoreErrors, StoresRefused: x.StoresRefused, CommitsAccepted: x.CommitsAccepted,
		CommitsRejected: x.CommitsRejected(), Retries: x.Retries, Filtered: x.Filtered,
		Decoded: x.Decoded, DecodeErrors: x.DecodeErrors, TransformErrors: x.TransformErrors,
		PollErrors: x.PollErrors, TopicsRecreated: x.TopicsRecreated, PartitionRewinds: x.PartitionRewinds, Errors: x.Errors()}, parts, offsetsErr})
}

// isJSON reports whether a request's Content-Type is JSON (application/json or an
// application/*+json type), as axum's Json extractor requires.
func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}
