package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferryio/ferry/connect"
)

// Label names.
const (
	labelKey       = "connector_key"
	labelType      = "connector_type"
	labelStage     = "stage"
	labelStatus    = "status"
	labelResult    = "result"
	labelStream    = "stream"
	labelTopic     = "topic"
	labelPartition = "partition"
	labelName      = "name"
)

// Values of ferry_sink_commits_total's result label.
const (
	resultAccepted         = "accepted"
	resultStale            = "stale"
	resultOutOfRange       = "out_of_range"
	resultUnknownPartition = "unknown_partition"
)

// states are the values of ferry_connector_status's status label, every one of which is
// exposed for each connector (1 for its state, 0 for the others).
var states = []connect.State{connect.StateStarting, connect.StateRunning, connect.StateStopping,
	connect.StateStopped, connect.StateError, connect.StateDegraded}

// Label sets, each sorted by name: the exposition writes labels in this order, as the
// registry sorts them.
var (
	connLabels   = []string{labelKey, labelType}
	statusLabels = []string{labelKey, labelType, labelStatus}
	stageLabels  = []string{labelKey, labelType, labelStage}
	resultLabels = []string{labelKey, labelResult}
	keyLabel     = []string{labelKey}
	partLabels   = []string{labelKey, labelPartition, labelStream, labelTopic}
	topicLabels  = []string{labelKey, labelStream, labelTopic}
	gaugeLabels  = []string{labelKey, labelType, labelName}
)

type kind uint8

const (
	kindGauge kind = iota
	kindCounter
	kindHistogram
)

// family is one metric family. A counter's name ends in _total: the exposition writes
// its HELP and TYPE lines without the suffix, its samples with it.
type family struct {
	name, help string
	kind       kind
	labels     []string
	desc       *prometheus.Desc
}

// Family indexes into families.
const (
	famSourcesTotal = iota
	famSourcesRunning
	famSinksTotal
	famSinksRunning
	famProduced
	famSent
	famConsumed
	famProcessed
	famFiltered
	famErrors
	famStage

	famUp
	famStatus
	famRetries
	famDeadLettered
	famSkipped
	famDecoded
	famDecodeErrors
	famTransformErrors
	famRestarts
	famCommits
	famStores
	famStoreErrors
	famRevoked
	famTopicsRecreated
	famPartitionRewinds
	famStoreLatency
	famStored
	famCurrent
	famLag
	famUncommitted
	famPending
	famStoresRefused
	famStoreFailures
	famConnGauge
	famOffsetsAge
	numFamilies
)

// families: Iggy's first (names, labels and buckets as Iggy's runtime exposes them),
// then Ferry's.
var families = [numFamilies]family{
	famSourcesTotal:   {"iggy_connectors_sources_total", "Source connectors configured, disabled ones included.", kindGauge, nil, nil},
	famSourcesRunning: {"iggy_connectors_sources_running", "Source connectors in state running.", kindGauge, nil, nil},
	famSinksTotal:     {"iggy_connectors_sinks_total", "Sink connectors configured, disabled ones included.", kindGauge, nil, nil},
	famSinksRunning:   {"iggy_connectors_sinks_running", "Sink connectors in state running.", kindGauge, nil, nil},
	famProduced:       {"iggy_connector_messages_produced_total", "Messages a source connector read from its plugin.", kindCounter, connLabels, nil},
	famSent:           {"iggy_connector_messages_sent_total", "Messages a source connector sent to Iggy and Iggy confirmed.", kindCounter, connLabels, nil},
	famConsumed:       {"iggy_connector_messages_consumed_total", "Messages a sink connector polled from Iggy.", kindCounter, connLabels, nil},
	famProcessed:      {"iggy_connector_messages_processed_total", "Messages of batches a sink connector's plugin accepted.", kindCounter, connLabels, nil},
	famFiltered:       {"iggy_connector_messages_filtered_total", "Messages a transform dropped.", kindCounter, connLabels, nil},
	famErrors: {"iggy_connector_errors_total",
		"Errors of a connector: failed consume calls, sends, state saves and offset stores, and rejected batches.", kindCounter, connLabels, nil},
	famStage: {"iggy_connector_stage_duration_seconds", "Duration of one stage of a batch, in seconds.", kindHistogram, stageLabels, nil},

	famUp:              {"ferry_connector_up", "1 if the connector is in state running, else 0.", kindGauge, connLabels, nil},
	famStatus:          {"ferry_connector_status", "1 for the connector's current state, 0 for the others.", kindGauge, statusLabels, nil},
	famRetries:         {"ferry_connector_retries_total", "Retried attempts: consume calls (sinks), sends and state saves (sources).", kindCounter, connLabels, nil},
	famDeadLettered:    {"ferry_connector_dead_lettered_total", "Messages sent to the dead-letter topic.", kindCounter, connLabels, nil},
	famSkipped:         {"ferry_connector_skipped_total", "Messages skipped by the on_failure policy skip.", kindCounter, connLabels, nil},
	famDecoded:         {"ferry_connector_decoded_total", "Payloads decoded by the stream's schema (sinks; raw streams are not decoded).", kindCounter, connLabels, nil},
	famDecodeErrors:    {"ferry_connector_decode_errors_total", "Messages whose payload failed decode (sinks) or encoding to the stream's schema (sources).", kindCounter, connLabels, nil},
	famTransformErrors: {"ferry_connector_transform_errors_total", "Messages a transform failed on.", kindCounter, connLabels, nil},
	famRestarts:        {"ferry_connector_restarts_total", "Restarts of the connector, automatic and requested.", kindCounter, connLabels, nil},
	famCommits: {"ferry_sink_commits_total",
		"Offset commits of a sink, by result: accepted, or refused as stale, out_of_range or unknown_partition.", kindCounter, resultLabels, nil},
	famStores:      {"ferry_sink_offset_stores_total", "Offset stores a sink's runtime wrote to Iggy (each may cover many messages).", kindCounter, keyLabel, nil},
	famStoreErrors: {"ferry_sink_offset_store_errors_total", "Failed offset stores (each is retried).", kindCounter, keyLabel, nil},
	famRevoked:     {"ferry_sink_revoked_partitions_total", "Partitions revoked from a sink by its consumer group.", kindCounter, keyLabel, nil},
	famTopicsRecreated: {"ferry_sink_topic_recreated_total",
		"Times a topic of the sink was found deleted and created again (its partitions then start afresh on the new topic).", kindCounter, keyLabel, nil},
	famPartitionRewinds: {"ferry_sink_partition_rewinds_total",
		"Times a partition of the sink was found gone back to an earlier offset (purged: it then starts afresh at offset 0).", kindCounter, keyLabel, nil},
	famStoreLatency: {"ferry_sink_store_latency_seconds",
		"Time from a commit (or the runtime's resolution) of an offset to its store in Iggy, in seconds.", kindHistogram, keyLabel, nil},
	famStored:      {"ferry_sink_stored_offset", "The consumer group's offset stored by this sink (partitions with none are left out).", kindGauge, partLabels, nil},
	famCurrent:     {"ferry_sink_current_offset", "The partition's last offset, as Iggy reported it with the last batch polled.", kindGauge, partLabels, nil},
	famLag:         {"ferry_sink_lag", "Messages of the partition after the stored offset.", kindGauge, partLabels, nil},
	famUncommitted: {"ferry_sink_uncommitted_messages", "Messages polled by the sink but not stored yet.", kindGauge, partLabels, nil},
	famPending:     {"ferry_sink_pending_messages", "Messages committed by the sink (or resolved by the runtime) but not stored yet.", kindGauge, partLabels, nil},
	famStoresRefused: {"ferry_sink_offset_stores_refused_total",
		"Offset stores refused for good (the partition is not the sink's any more, or the store would move the group's offset back); each releases its partition.", kindCounter, keyLabel, nil},
	famStoreFailures: {"ferry_sink_consecutive_store_failures",
		"Consecutive failed offset stores of the partition (0: the last one succeeded); meanwhile stores are retried with backoff and polling pauses at max_uncommitted.", kindGauge, partLabels, nil},
	famConnGauge: {"ferry_connector_gauge",
		"A connector's own figure, by name (the PostgreSQL CDC source: pg_slot_lag_bytes, pg_last_sent_lsn, pg_confirmed_flush_lsn).", kindGauge, gaugeLabels, nil},
	famOffsetsAge: {"ferry_sink_offsets_age_seconds",
		"Age of the read of Iggy behind a topic's ferry_sink_current_offset, ferry_sink_stored_offset and ferry_sink_lag (a scrape is answered from the last read while the next one runs).", kindGauge, topicLabels, nil},
}

func init() {
	for i := range families {
		f := &families[i]
		f.desc = prometheus.NewDesc(f.name, f.help, f.labels, nil)
	}
}

// emitter receives the samples of one scrape: the collector turns them into constant
// metrics, the Handler writes them as text. labels are the values of the family's
// labels, in its order.
type emitter interface {
	value(f int, v uint64, labels ...string)
	seconds(f int, d time.Duration, labels ...string)
	histogram(f int, h connect.Histogram, labels ...string)
}

// collect emits every sample of src's families: src.Status and src.Configured are
// called once each, src.SinkPartitions once per sink (ctx bounds its wait).
func collect(ctx context.Context, e emitter, src Source) {
	sts := src.Status()
	sinks, sources := src.Configured()
	var sinksRunning, sourcesRunning uint64
	for i := range sts {
		st := &sts[i]
		if st.State == connect.StateRunning {
			if st.Kind == connect.KindSink {
				sinksRunning++
			} else {
				sourcesRunning++
			}
		}
		if st.Kind == connect.KindSink {
			// Every partition, in every state, with Iggy's offsets; on an error the
			// partitions of the topics that could be read, and the sink's own view of
			// the others (their lag only when it knows the current offset).
			st.Partitions, _ = src.SinkPartitions(ctx, *st)
		}
		collectConnector(e, st)
	}
	e.value(famSourcesTotal, uint64(max(sources, 0)))
	e.value(famSourcesRunning, sourcesRunning)
	e.value(famSinksTotal, uint64(max(sinks, 0)))
	e.value(famSinksRunning, sinksRunning)
}

// collectConnector emits one connector's samples: the Iggy counters of its kind (a
// source's produced and sent, a sink's consumed and processed, as Iggy's /stats reports
// them; filtered and errors for both), the stage histograms present in Stats.Stages, the
// ferry_connector_* families and, for a sink, the ferry_sink_* families.
func collectConnector(e emitter, st *connect.Status) {
	k, typ, s := st.Key, st.Kind, &st.Stats
	if typ == connect.KindSink {
		e.value(famConsumed, s.Polled, k, typ)
		e.value(famProcessed, s.Delivered, k, typ)
	} else {
		e.value(famProduced, s.Produced, k, typ)
		e.value(famSent, s.Sent, k, typ)
	}
	e.value(famFiltered, s.Filtered, k, typ)
	e.value(famErrors, s.Errors(), k, typ)
	for _, stage := range stageNames {
		if h, ok := s.Stages[stage]; ok {
			e.histogram(famStage, h, k, typ, stage)
		}
	}

	e.value(famUp, boolValue(st.State == connect.StateRunning), k, typ)
	for _, state := range states {
		e.value(famStatus, boolValue(st.State == state), k, typ, string(state))
	}
	e.value(famRetries, s.Retries, k, typ)
	e.value(famDeadLettered, s.DeadLettered, k, typ)
	e.value(famSkipped, s.Skipped, k, typ)
	e.value(famDecoded, s.Decoded, k, typ)
	e.value(famDecodeErrors, s.DecodeErrors, k, typ)
	e.value(famTransformErrors, s.TransformErrors, k, typ)
	e.value(famRestarts, st.Restart.Total, k, typ)
	for _, g := range st.Gauges {
		e.value(famConnGauge, g.Value, k, typ, g.Name)
	}
	if typ != connect.KindSink {
		return
	}

	e.value(famCommits, s.CommitsAccepted, k, resultAccepted)
	e.value(famCommits, s.CommitsOutOfRange, k, resultOutOfRange)
	e.value(famCommits, s.CommitsStale, k, resultStale)
	e.value(famCommits, s.CommitsUnknown, k, resultUnknownPartition)
	e.value(famStores, s.Stores, k)
	e.value(famStoresRefused, s.StoresRefused, k)
	e.value(famStoreErrors, s.StoreErrors, k)
	e.value(famRevoked, s.Revoked, k)
	e.value(famTopicsRecreated, s.TopicsRecreated, k)
	e.value(famPartitionRewinds, s.PartitionRewinds, k)
	e.histogram(famStoreLatency, s.StoreLatency, k)

	type where struct {
		stream, topic string
		partition     uint32
	}
	var seen map[where]bool
	if len(st.Partitions) > 1 {
		seen = make(map[where]bool, len(st.Partitions))
	}
	for _, p := range st.Partitions {
		if seen != nil { // a duplicate series (it should not occur) would fail the family
			w := where{p.Stream, p.Topic, p.Partition}
			if seen[w] {
				continue
			}
			seen[w] = true
		}
		part := strconv.FormatUint(uint64(p.Partition), 10)
		if p.Stored >= 0 {
			e.value(famStored, uint64(p.Stored), k, part, p.Stream, p.Topic)
		}
		if p.Current >= 0 {
			e.value(famCurrent, uint64(p.Current), k, part, p.Stream, p.Topic)
		}
		if p.Current >= 0 || p.FromServer { // an empty partition Iggy reported has lag 0
			e.value(famLag, p.Lag, k, part, p.Stream, p.Topic)
		}
		e.value(famUncommitted, p.Uncommitted, k, part, p.Stream, p.Topic)
		e.value(famPending, p.Pending, k, part, p.Stream, p.Topic)
		e.value(famStoreFailures, uint64(max(p.StoreFailures, 0)), k, part, p.Stream, p.Topic)
	}
	// One age per topic: its partitions come from one read of Iggy (they are sorted by
	// stream and topic).
	now := time.Now()
	for i, p := range st.Partitions {
		if p.ReadAt.IsZero() || (i > 0 && st.Partitions[i-1].Stream == p.Stream && st.Partitions[i-1].Topic == p.Topic && !st.Partitions[i-1].ReadAt.IsZero()) {
			continue
		}
		e.seconds(famOffsetsAge, max(now.Sub(p.ReadAt), 0), k, p.Stream, p.Topic)
	}
}

// stageNames are Iggy's stages in label order (which is the order of the exposition).
var stageNames = []string{connect.StageDecode, connect.StageFFI, connect.StageIggySend, connect.StagePrepare,
	connect.StageStateSave, connect.StageTotal}

func boolValue(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// collector is the prometheus.Collector of NewCollector.
type collector struct{ src Source }

// NewCollector returns a prometheus.Collector of src's families (the package comment
// lists them), for a registry of the caller's: each Collect calls src.Status and
// src.Configured once and emits constant metrics from them. It is safe for concurrent
// use if src is. [Handler] serves the same families without it: it writes them
// straight as text, which costs a fraction of a registry's gathering and encoding.
//
// For each connector it emits the families of its kind: a source's produced, sent,
// filtered and errors counters, a sink's consumed, processed, filtered and errors (as
// Iggy's /stats does), the stage histograms present in its Stats.Stages, and the
// ferry_connector_* families; a sink also gets the ferry_sink_* families, one series of
// each partition gauge per partition in its tables.
func NewCollector(src Source) prometheus.Collector { return collector{src: src} }

// Describe sends the descriptions of every family.
func (collector) Describe(ch chan<- *prometheus.Desc) {
	for i := range families {
		ch <- families[i].desc
	}
}

// Collect scrapes the Source once.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	collect(context.Background(), metricEmitter(ch), c.src)
}

type metricEmitter chan<- prometheus.Metric

func (ch metricEmitter) seconds(f int, d time.Duration, labels ...string) {
	ch <- prometheus.MustNewConstMetric(families[f].desc, prometheus.GaugeValue, d.Seconds(), labels...)
}

func (ch metricEmitter) value(f int, v uint64, labels ...string) {
	t := prometheus.GaugeValue
	if families[f].kind == kindCounter {
		t = prometheus.CounterValue
	}
	ch <- prometheus.MustNewConstMetric(families[f].desc, t, float64(v), labels...)
}

// histogram emits h in seconds. h.Counts holds one count per bucket (not cumulative),
// plus possibly a last one above the highest bound, which only the +Inf bucket (the
// total count) includes.
func (ch metricEmitter) histogram(f int, h connect.Histogram, labels ...string) {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		if i < len(h.Counts) {
			cum += h.Counts[i]
		}
		buckets[b.Seconds()] = cum
	}
	ch <- prometheus.MustNewConstHistogram(families[f].desc, histogramCount(h), h.Sum.Seconds(), buckets, labels...)
}

// histogramCount is h's total: h.Count, or the sum of its buckets if that is more.
func histogramCount(h connect.Histogram) uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return max(n, h.Count)
}
