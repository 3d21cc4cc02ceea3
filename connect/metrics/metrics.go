// Package metrics exposes a running connect.Runtime as Prometheus metrics: Iggy's
// runtime's families (same names, labels and buckets) and Ferry's own, read from the
// runtime's status at scrape time, so the pipeline pays nothing per message for them.
//
// What it promises: [Handler] answers a scrape whose Accept header names OpenMetrics
// (Prometheus' scrapes do) in the OpenMetrics 1.0.0 text format (content type
// "application/openmetrics-text; version=1.0.0; charset=utf-8", last line "# EOF"), as
// Iggy's runtime answers every request; any other request (curl, promtool) gets the
// Prometheus text format 0.0.4, which `promtool check metrics` accepts without a
// complaint. Counters are exposed once as NAME_total; in OpenMetrics their HELP and TYPE
// lines name them without the suffix, in the text format with it. Every scrape calls
// Source.Status and Source.Configured once each, and Source.SinkPartitions once per sink
// (whose reads of Iggy are cached by the runtime, not here).
//
// The families, their types and labels (the Iggy ones as Iggy's runtime names them):
//
//	iggy_connectors_sources_total, iggy_connectors_sinks_total      gauge  configured, disabled included (untyped in the text format)
//	iggy_connectors_sources_running, iggy_connectors_sinks_running  gauge  in state running
//	iggy_connector_messages_produced_total  counter  connector_key, connector_type (sources)
//	iggy_connector_messages_sent_total      counter  connector_key, connector_type (sources)
//	iggy_connector_messages_consumed_total  counter  connector_key, connector_type (sinks)
//	iggy_connector_messages_processed_total counter  connector_key, connector_type (sinks)
//	iggy_connector_messages_filtered_total  counter  connector_key, connector_type
//	iggy_connector_errors_total             counter  connector_key, connector_type
//	iggy_connector_stage_duration_seconds   histogram connector_key, connector_type, stage
//
//	ferry_connector_up, ferry_connector_status (+ status)         gauge    connector_key, connector_type
//	ferry_connector_retries_total, _dead_lettered_total,
//	  _skipped_total, _restarts_total                             counter  connector_key, connector_type
//	ferry_sink_commits_total                                      counter  connector_key, result
//	ferry_sink_offset_stores_total, _offset_store_errors_total,
//	  _revoked_partitions_total, _topic_recreated_total           counter  connector_key
//	ferry_sink_store_latency_seconds                              histogram connector_key
//	ferry_sink_stored_offset, _current_offset, _lag,
//	  _uncommitted_messages, _pending_messages                    gauge    connector_key, stream, topic, partition
//
// plus the Go runtime's go_* and the process's process_* families.
//
// A connector gets the Iggy counters of its kind, as Iggy's /stats reports them (a
// source produced, sent, filtered, errors; a sink consumed, processed, filtered,
// errors), one stage histogram per stage present in its Stats.Stages (buckets
// connect.StageBounds, Iggy's), and every ferry_connector_* family (a source's
// dead_lettered and skipped are 0). The ferry_sink_* families are a sink's: one series
// of each partition gauge per partition of its topics, in every state of the sink
// (running, paused, in error, stopped, waiting for a restart: Source.SinkPartitions),
// so the series outlive restarts; current_offset is Iggy's, stored_offset the group's,
// lag the difference. stored_offset is left out while nothing is stored, current_offset
// while the partition is empty, and lag only when Iggy could not be read and the sink
// knows no current offset. iggy_connector_errors_total counts failed starts too. ferry_sink_store_latency_seconds has the buckets of Stats.StoreLatency;
// its overflow count is in +Inf only. Integer values are written as integers ("42",
// exact above 2^53), as Iggy's runtime writes them.
//
// Must not import: server, connectors, cmd, connect/httpapi (internal/archtest).
package metrics

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/ferryio/ferry/connect"
)

// Source is what the metrics read: connect.Runtime implements it.
type Source interface {
	Status() []connect.Status
	// Configured counts every connector config, disabled ones included (Iggy's *_total
	// gauges count those).
	Configured() (sinks, sources int)
	// SinkPartitions completes a sink's status with every partition of its topics and
	// the offsets Iggy has for them (connect.Runtime.SinkPartitions: cached, at most one
	// read per topic per second); on an error, the partitions it could read.
	SinkPartitions(ctx context.Context, st connect.Status) ([]connect.PartitionStatus, error)
}

// ContentType is the content type of [Handler]'s answer to a scrape that accepts
// OpenMetrics: OpenMetrics 1.0.0 text.
const ContentType = string(expfmt.FmtOpenMetrics_1_0_0)

// TextContentType is the content type of [Handler]'s answer to any other request: the
// Prometheus text format 0.0.4.
const TextContentType = string(expfmt.FmtText)

// Handler serves the metrics of src: the families of the package comment, then the Go
// runtime's (go_*) and the process's (process_*), from collectors on a registry of its
// own; in OpenMetrics (ending "# EOF") when the Accept header names it, else in the
// Prometheus text format. Its method is not checked (the HTTP API routes GET to it).
// Each request calls src.Status and src.Configured once, src.SinkPartitions once per
// sink (bounded by the request's context). It is safe for concurrent use if src is.
//
// src's families are written as text directly rather than through a registry (see
// [NewCollector] for that): a scrape of 4 sinks × 16 partitions costs a few hundred
// microseconds (BenchmarkScrape), most of it the process collector's reads of /proc.
// A go_* or process_* family that cannot be gathered is left out of the answer, and so
// is go_memstats_alloc_bytes (see shadowed).
func Handler(src Source) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &handler{src: src, runtime: reg}
}

type handler struct {
	src     Source
	runtime prometheus.Gatherer // go_* and process_*
	scrapes sync.Pool           // *scrape, reused buffers
}

type scrape struct {
	text textEmitter
	buf  []byte
	out  bytes.Buffer
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s, _ := h.scrapes.Get().(*scrape)
	if s == nil {
		s = new(scrape)
	}
	defer h.scrapes.Put(s)
	om := acceptsOpenMetrics(r.Header.Get("Accept"))
	s.text.reset()
	collect(r.Context(), &s.text, h.src)
	s.buf = s.text.write(s.buf[:0], om)
	s.out.Reset()
	s.out.Write(s.buf)
	mfs, _ := h.runtime.Gather() // on an error, the families that could be gathered
	format, contentType := expfmt.FmtText, TextContentType
	if om {
		format, contentType = expfmt.FmtOpenMetrics_1_0_0, ContentType
	}
	enc := expfmt.NewEncoder(&s.out, format)
	for _, mf := range mfs {
		if om && shadowed(mf, mfs) {
			continue
		}
		if err := enc.Encode(mf); err != nil {
			http.Error(w, "metrics: encode "+mf.GetName()+": "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if c, ok := enc.(expfmt.Closer); ok && om {
		if err := c.Close(); err != nil { // writes "# EOF"
			http.Error(w, "metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", contentType)
	_, _ = w.Write(s.out.Bytes())
}

// acceptsOpenMetrics reports whether an Accept header names OpenMetrics text (any
// version, not refused with q=0), as Prometheus' scrapes do.
func acceptsOpenMetrics(accept string) bool {
	for _, r := range strings.Split(accept, ",") {
		typ, params, _ := strings.Cut(r, ";")
		if !strings.EqualFold(strings.TrimSpace(typ), "application/openmetrics-text") {
			continue
		}
		refused := false
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(k, "q") {
				if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && q <= 0 {
					refused = true
				}
			}
		}
		if !refused {
			return true
		}
	}
	return false
}

// shadowed reports whether mf is not a counter and a counter of mfs is named like it
// plus _total: in OpenMetrics both would be the family mf.Name, twice. The Go
// collector has one such pair: the gauge go_memstats_alloc_bytes (the same value as
// go_memstats_heap_alloc_bytes) and the counter go_memstats_alloc_bytes_total; the
// gauge is left out.
func shadowed(mf *dto.MetricFamily, mfs []*dto.MetricFamily) bool {
	if mf.GetType() == dto.MetricType_COUNTER {
		return false
	}
	total := mf.GetName() + "_total"
	i, found := slices.BinarySearchFunc(mfs, total, func(m *dto.MetricFamily, name string) int {
		return strings.Compare(m.GetName(), name)
	})
	return found && mfs[i].GetType() == dto.MetricType_COUNTER
}

// Gatherer gathers the runtime's own families (those of the scrape but go_* and
// process_*) for a reader other than the scrape: the OTLP push of connect/telemetry.
func Gatherer(src Source) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src))
	return reg
}
