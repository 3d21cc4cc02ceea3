package ferrycli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/connect/config"
)

// Environment fallbacks of the status command's flags.
const (
	envAPIURL = "FERRY_API_URL"
	envAPIKey = "FERRY_API_KEY"
)

type statusFlags struct {
	url, apiKey string
	config      string // where to discover the URL when url is ""
	json        bool
	timeout     time.Duration
}

func newStatusCmd() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the status of a running runtime's sinks and sources (from its HTTP API)",
		Long: `Status asks a running runtime's HTTP API ([http] in its config.toml) for every sink and
source and prints one line each: status, counters (sinks: polled, delivered, committed;
sources: produced, sent; both: dead-lettered, skipped, decode errors), restarts and the
last error; then every partition of each sink's topics, in any state of the sink, with
Iggy's current offset, the group's stored offset and the lag between them. --json prints
the API's status documents instead. The exit status is 0 when the API answered, 1
otherwise. Without --url, the API is found from the runtime config (--config, else as ferry
run finds it): the URL ferry run wrote to <state.path>/http.url when it bound the API (so
[http] address may use port 0), else [http] address, else http://127.0.0.1:8081. Without
--api-key, the key is that config's [http] api_key when the URL came from it or --config
was given.`,
		Example: `  ferry status
  ferry status --url http://10.0.0.5:8081 --api-key "$KEY" --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return status(cmd.Context(), cmd.OutOrStdout(), f, time.Now)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", envString(envAPIURL, ""), "the runtime's HTTP API (default: the URL a running ferry run wrote to <state.path>/http.url, else [http] address, else "+defaultAPIURL+") [FERRY_API_URL]")
	fl.StringVar(&f.config, "config", envString(envConfig, ""), "the runtime config.toml whose state.path and [http] address find the API when --url is not given [FERRY_CONFIG]")
	fl.StringVar(&f.apiKey, "api-key", envString(envAPIKey, ""), "the API key, sent as the api-key header (default: the config's [http] api_key when the URL comes from it or --config is given) [FERRY_API_KEY]")
	fl.BoolVar(&f.json, "json", false, "print the status documents as JSON")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "bound on the whole command")
	return cmd
}

// The API's JSON shapes (docs: the HTTP API contract), as far as status reads them.
type (
	apiInfo struct {
		Key       string        `json:"key"`
		Name      string        `json:"name"`
		Status    string        `json:"status"`
		LastError *apiLastError `json:"last_error"`
	}
	apiLastError struct {
		Message   string `json:"message"`
		Timestamp int64  `json:"timestamp"` // µs since the epoch
	}
	apiStatus struct {
		Key        string         `json:"key"`
		Kind       string         `json:"kind"`
		Status     string         `json:"status"`
		Paused     bool           `json:"paused"`
		LastError  *apiLastError  `json:"last_error"`
		Restart    apiRestart     `json:"restart"`
		Stats      apiStats       `json:"stats"`
		Partitions []apiPartition `json:"partitions"`
		// Gauges are a connector's own figures (the CDC source's slot lag), by name.
		Gauges map[string]uint64 `json:"gauges"`

		known bool // false: the runtime has no status route, only the list entry is known
	}
	apiRestart struct {
		Restarts    uint32 `json:"restarts"`
		MaxRestarts uint32 `json:"max_restarts"`
		NextRetry   *int64 `json:"next_retry"` // µs since the epoch
		GaveUp      bool   `json:"gave_up"`
	}
	apiStats struct {
		Polled       int64 `json:"polled"`
		Delivered    int64 `json:"delivered"`
		Committed    int64 `json:"committed"`
		Produced     int64 `json:"produced"`
		Sent         int64 `json:"sent"`
		DeadLettered int64 `json:"dead_lettered"`
		Skipped      int64 `json:"skipped"`
		DecodeErrors int64 `json:"decode_errors"`
	}
	apiPartition struct {
		Stream        string `json:"stream"`
		Topic         string `json:"topic"`
		PartitionID   uint32 `json:"partition_id"`
		State         string `json:"state"`
		CurrentOffset int64  `json:"current_offset"` // -1: none
		Stored        int64  `json:"stored"`         // -1: none
		Lag           uint64 `json:"lag"`
		Uncommitted   uint64 `json:"uncommitted"`
		Paused        bool   `json:"paused"`
	}
	apiError struct {
		Code   string `json:"code"`
		Reason string `json:"reason"`
	}
)

// httpError is an answer of the API other than 200 and 401.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// apiClient reads the runtime's HTTP API.
type apiClient struct {
	base, key string
	hc        *http.Client
}

// get fetches base/path and returns the body of a 200.
func (c *apiClient) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("api-key", c.key)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the Ferry API at %s: %w", c.base, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading the answer: %w", path, err)
	}
	switch {
	case res.StatusCode == http.StatusOK:
		return body, nil
	case res.StatusCode == http.StatusUnauthorized && c.key == "":
		return nil, fmt.Errorf("the API needs --api-key (or %s): GET %s answered 401", envAPIKey, path)
	case res.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("the API refused the API key: GET %s answered 401", path)
	}
	msg := "GET " + path + ": " + res.Status
	var ae apiError
	if json.Unmarshal(body, &ae) == nil && ae.Code != "" {
		msg += ": " + ae.Code + ": " + ae.Reason
	} else if text := strings.TrimSpace(string(body)); text != "" {
		msg += ": " + text
	}
	return nil, &httpError{status: res.StatusCode, msg: msg}
}

func (c *apiClient) getJSON(ctx context.Context, path string, out any) ([]byte, error) {
	body, err := c.get(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return nil, fmt.Errorf("GET %s: not the JSON the API answers: %w", path, err)
	}
	return body, nil
}

// connectors reads one kind's list and each one's status. A connector whose status route
// answers 404 (gone since the list, or a runtime without the route) keeps its list entry.
func (c *apiClient) connectors(ctx context.Context, kind string) ([]apiStatus, []json.RawMessage, error) {
	var list []json.RawMessage
	if _, err := c.getJSON(ctx, "/"+kind+"s", &list); err != nil {
		var he *httpError
		if errors.As(err, &he) && he.status == http.StatusNotFound {
			return nil, nil, fmt.Errorf("%w (is %s a connectors runtime's HTTP API?)", err, c.base)
		}
		return nil, nil, err
	}
	var sts []apiStatus
	var raws []json.RawMessage
	for _, entry := range list {
		var in apiInfo
		if err := json.Unmarshal(entry, &in); err != nil {
			return nil, nil, fmt.Errorf("GET /%ss: not the JSON the API answers: %w", kind, err)
		}
		var st apiStatus
		raw, err := c.getJSON(ctx, "/"+kind+"s/"+url.PathEscape(in.Key)+"/status", &st)
		var he *httpError
		switch {
		case errors.As(err, &he) && he.status == http.StatusNotFound:
			st = apiStatus{Key: in.Key, Kind: kind, Status: in.Status, LastError: in.LastError}
			raw = entry
		case err != nil:
			return nil, nil, err
		default:
			st.known = true
		}
		st.Kind = kind
		sts = append(sts, st)
		raws = append(raws, raw)
	}
	return sts, raws, nil
}

// defaultAPIURL is upstream's default http.address as a URL.
const defaultAPIURL = "http://127.0.0.1:8081"

// loadStatusConfig is the runtime config status reads: path's, or (path "") the one ferry
// run would find, or the defaults when there is none. A named config that does not load
// is an error.
func loadStatusConfig(path string) (*config.Runtime, error) {
	rc, err := config.ParseRuntime(path)
	if err != nil && path != "" {
		return nil, err
	}
	if err != nil { // none found: the defaults, as a run without one would have
		rc = config.DefaultRuntime()
	}
	return rc, nil
}

// apiURLOf finds the API of the runtime of rc when no --url is given: the URL `ferry run`
// wrote to <state.path>/http.url (it names the bound port, so http.address may say port
// 0), else [http] address (a host binding every interface is asked on 127.0.0.1), else
// upstream's default.
func apiURLOf(rc *config.Runtime) string {
	if u, err := readAPIURL(stateDir(rc)); err == nil {
		return u
	}
	host, port, err := net.SplitHostPort(rc.HTTP.Address)
	if err == nil && port != "0" && port != "" {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = "127.0.0.1"
		}
		scheme := "http"
		if rc.HTTP.TLS.Enabled {
			scheme = "https"
		}
		return scheme + "://" + net.JoinHostPort(host, port)
	}
	return defaultAPIURL // no port to ask
}

func status(ctx context.Context, w io.Writer, f statusFlags, now func() time.Time) error {
	// Without --api-key, the key is the config's [http] api_key when the config says where
	// the API is (no --url) or was named: a key found by discovery is never sent to a URL
	// given by hand, which may be another runtime's.
	if f.url == "" || (f.apiKey == "" && f.config != "") {
		rc, err := loadStatusConfig(f.config)
		if err != nil {
			return fmt.Errorf("find the API (or give --url): %w", err)
		}
		if f.url == "" {
			f.url = apiURLOf(rc)
		}
		if f.apiKey == "" {
			f.apiKey = rc.HTTP.APIKey.Reveal()
		}
	}
	base := strings.TrimRight(f.url, "/")
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url %q: want http://HOST:PORT or https://HOST:PORT", f.url)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	c := &apiClient{base: base, key: f.apiKey, hc: &http.Client{Transport: tr}}
	sinks, sinkRaw, err := c.connectors(ctx, "sink")
	if err != nil {
		return err
	}
	sources, sourceRaw, err := c.connectors(ctx, "source")
	if err != nil {
		return err
	}
	if f.json {
		doc := struct {
			Sinks   []json.RawMessage `json:"sinks"`
			Sources []json.RawMessage `json:"sources"`
		}{append([]json.RawMessage{}, sinkRaw...), append([]json.RawMessage{}, sourceRaw...)}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	return printConnectors(w, append(sinks, sources...), now())
}

// printConnectors writes the connectors' table, then each sink's partitions.
func printConnectors(w io.Writer, all []apiStatus, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	// DEAD-LETTERED, SKIPPED and DECODE ERRORS say why fewer were delivered (or sent) than
	// polled (or produced).
	fmt.Fprintln(tw, "KIND\tKEY\tSTATUS\tPOLLED\tDELIVERED\tCOMMITTED\tPRODUCED\tSENT\tDEAD-LETTERED\tSKIPPED\tDECODE ERRORS\tRESTARTS\tLAST ERROR")
	for _, s := range all {
		st := s.Status
		if s.Paused {
			st += " (paused)"
		}
		counters := []string{"-", "-", "-", "-", "-", "-", "-", "-"}
		failed := []string{num(s.Stats.DeadLettered), num(s.Stats.Skipped), num(s.Stats.DecodeErrors)}
		if s.known && s.Kind == "sink" {
			counters = append([]string{num(s.Stats.Polled), num(s.Stats.Delivered), num(s.Stats.Committed), "-", "-"}, failed...)
		} else if s.known {
			counters = append([]string{"-", "-", "-", num(s.Stats.Produced), num(s.Stats.Sent)}, failed...)
		}
		restarts := "-"
		if s.known {
			restarts = fmtRestart(s.Restart, now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Kind, s.Key, st, strings.Join(counters, "\t"), restarts, fmtLastError(s.LastError))
	}
	if len(all) == 0 {
		fmt.Fprintln(tw, "(no sinks or sources)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printGauges(w, all); err != nil {
		return err
	}
	for _, s := range all {
		if s.Kind != "sink" || !s.known {
			continue
		}
		if len(s.Partitions) == 0 {
			fmt.Fprintf(w, "\nsink %s: no partitions\n", s.Key)
			continue
		}
		fmt.Fprintf(w, "\nsink %s: partitions\n", s.Key)
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "STREAM\tTOPIC\tPARTITION\tSTATE\tCURRENT\tSTORED\tLAG\tUNCOMMITTED\tPAUSED")
		for _, p := range s.Partitions {
			paused := "no"
			if p.Paused {
				paused = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\n", p.Stream, p.Topic, p.PartitionID, p.State,
				offset(p.CurrentOffset), offset(p.Stored), p.Lag, p.Uncommitted, paused)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// printGauges writes each connector's own figures (sdk.Gauger), sorted by name.
func printGauges(w io.Writer, all []apiStatus) error {
	for _, s := range all {
		if len(s.Gauges) == 0 {
			continue
		}
		names := make([]string, 0, len(s.Gauges))
		for n := range s.Gauges {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(w, "\n%s %s: gauges\n", s.Kind, s.Key)
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tVALUE")
		for _, n := range names {
			fmt.Fprintf(tw, "%s\t%d\n", n, s.Gauges[n])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func num(n int64) string { return strconv.FormatInt(n, 10) }

// offset formats an offset; -1 (none) is "-".
func offset(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}

// fmtRestart is "N" (automatic restarts), "N/MAX" when restarts are bounded, with
// ", gave up" or ", next in 5s" appended.
func fmtRestart(r apiRestart, now time.Time) string {
	s := strconv.FormatUint(uint64(r.Restarts), 10)
	if r.MaxRestarts > 0 {
		s += "/" + strconv.FormatUint(uint64(r.MaxRestarts), 10)
	}
	if r.GaveUp {
		s += ", gave up"
	}
	if r.NextRetry != nil {
		if d := time.UnixMicro(*r.NextRetry).Sub(now).Round(time.Second); d > 0 {
			s += ", next in " + d.String()
		} else {
			s += ", next now"
		}
	}
	return s
}

func fmtLastError(e *apiLastError) string {
	if e == nil {
		return "-"
	}
	if e.Timestamp == 0 {
		return e.Message
	}
	return e.Message + " (" + time.UnixMicro(e.Timestamp).UTC().Format(time.RFC3339) + ")"
}
