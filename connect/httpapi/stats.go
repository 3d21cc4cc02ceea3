package httpapi

import (
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferryio/ferry/connect"
)

// statsJSON is Iggy's ConnectorRuntimeStats (GET /stats).
type statsJSON struct {
	Version        string           `json:"connectors_runtime_version"`
	VersionSemver  *uint32          `json:"connectors_runtime_version_semver,omitempty"`
	ProcessID      uint32           `json:"process_id"`
	CPUUsage       float32          `json:"cpu_usage"`
	TotalCPUUsage  float32          `json:"total_cpu_usage"`
	MemoryUsage    uint64           `json:"memory_usage"`
	TotalMemory    uint64           `json:"total_memory"`
	AvailableMem   uint64           `json:"available_memory"`
	RunTime        uint64           `json:"run_time"`
	StartTime      uint64           `json:"start_time"`
	SourcesTotal   uint32           `json:"sources_total"`
	SourcesRunning uint32           `json:"sources_running"`
	SinksTotal     uint32           `json:"sinks_total"`
	SinksRunning   uint32           `json:"sinks_running"`
	Connectors     []connectorStats `json:"connectors"`
}

// connectorStats is Iggy's ConnectorStats: sources carry produced, sent and filtered,
// sinks consumed, processed and filtered.
type connectorStats struct {
	Key               string  `json:"key"`
	Name              string  `json:"name"`
	ConnectorType     string  `json:"connector_type"`
	Version           string  `json:"version"`
	VersionSemver     *uint32 `json:"version_semver,omitempty"`
	Status            string  `json:"status"`
	Enabled           bool    `json:"enabled"`
	MessagesProduced  *uint64 `json:"messages_produced,omitempty"`
	MessagesSent      *uint64 `json:"messages_sent,omitempty"`
	MessagesConsumed  *uint64 `json:"messages_consumed,omitempty"`
	MessagesProcessed *uint64 `json:"messages_processed,omitempty"`
	MessagesFiltered  *uint64 `json:"messages_filtered,omitempty"`
	Errors            uint64  `json:"errors"`
}

// semver is Iggy's numeric version: major, then minor and patch as three digits each
// (0.5.0 → 5000; 1.2.3 → 1002003); false when v is not major.minor.patch (a leading "v",
// a "-prerelease" and "+build" are accepted and ignored) or the number overflows a u32.
func semver(v string) (uint32, bool) {
	v = strings.TrimPrefix(v, "v")
	v, _, _ = strings.Cut(v, "+")
	v, _, _ = strings.Cut(v, "-")
	parts := strings.SplitN(v, ".", 4)
	if len(parts) < 3 {
		return 0, false
	}
	var n [3]uint64
	for i := range n {
		x, err := strconv.ParseUint(parts[i], 10, 32)
		if err != nil {
			return 0, false
		}
		n[i] = x
	}
	s := strconv.FormatUint(n[0], 10) + pad3(n[1]) + pad3(n[2])
	out, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(out), true
}

func pad3(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for len(s) < 3 {
		s = "0" + s
	}
	return s
}

func semverPtr(v string) *uint32 {
	if n, ok := semver(v); ok {
		return &n
	}
	return nil
}

func u64(v uint64) *uint64 { return &v }

// GET /stats.
func (s *Server) getStats(w http.ResponseWriter, _ *http.Request) {
	sys := s.probe.read()
	sinksTotal, sourcesTotal := s.rt.Configured()
	now := time.Now()
	out := statsJSON{
		Version: s.version, VersionSemver: semverPtr(s.version), ProcessID: uint32(os.Getpid()),
		CPUUsage: sys.CPU, TotalCPUUsage: sys.TotalCPU, MemoryUsage: sys.RSS, TotalMemory: sys.Total, AvailableMem: sys.Available,
		RunTime: uint64(max(now.Sub(s.started), 0) / time.Microsecond), StartTime: uint64(max(s.started.UnixMicro(), 0)),
		SinksTotal: uint32(sinksTotal), SourcesTotal: uint32(sourcesTotal), Connectors: []connectorStats{},
	}
	sts := s.rt.Status()
	// Sources first, as upstream lists them.
	slices.SortStableFunc(sts, func(a, b connect.Status) int {
		if a.Kind == b.Kind {
			return strings.Compare(a.Key, b.Key)
		}
		if a.Kind == connect.KindSource {
			return -1
		}
		return 1
	})
	for _, st := range sts {
		version := st.PluginVersion
		if version == "" {
			version = "unknown"
		}
		c := connectorStats{Key: st.Key, Name: st.Name, ConnectorType: st.Kind, Version: version, VersionSemver: semverPtr(version),
			Status: string(st.State), Enabled: st.Enabled, Errors: st.Stats.Errors(), MessagesFiltered: u64(st.Stats.Filtered)}
		running := st.State == connect.StateRunning
		if st.Kind == connect.KindSource {
			c.MessagesProduced, c.MessagesSent = u64(st.Stats.Produced), u64(st.Stats.Sent)
			if running {
				out.SourcesRunning++
			}
		} else {
			c.MessagesConsumed, c.MessagesProcessed = u64(st.Stats.Polled), u64(st.Stats.Delivered)
			if running {
				out.SinksRunning++
			}
		}
		out.Connectors = append(out.Connectors, c)
	}
	s.writeJSON(w, http.StatusOK, out)
}
