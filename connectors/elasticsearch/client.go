package elasticsearch

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// client is the few REST calls the sink makes, the same on Elasticsearch 8 and OpenSearch 2.
type client struct {
	base     string
	where    string // base with a password in it hidden: for messages
	auth     string // the Authorization header, or ""
	username string
	http     *http.Client
}

// Errors the sink steers by.
var (
	// errUnreachable: the cluster did not answer, or answered 503 (unavailable, as while
	// it recovers after a restart).
	errUnreachable = errors.New("cluster unreachable")
	// errTooLarge: 413, a request larger than the cluster takes.
	errTooLarge = errors.New("request too large")
)

func newClient(cfg config) *client {
	base := strings.TrimRight(cfg.URL, "/")
	c := &client{base: base, where: sdk.RedactURL(base), http: &http.Client{Timeout: time.Duration(cfg.TimeoutSeconds) * time.Second}}
	switch {
	case !cfg.APIKey.IsZero():
		c.auth = "ApiKey " + cfg.APIKey.Reveal()
	case cfg.Username != "":
		c.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(cfg.Username+":"+cfg.Password.Reveal()))
	}
	if cfg.Username != "" {
		c.username = cfg.Username
	}
	return c
}

// user names the basic authentication user for an error, or nothing.
func (c *client) user() string {
	if c.username == "" {
		return ""
	}
	return fmt.Sprintf(" of user %q", c.username)
}

// do sends one request and reads the whole answer. A failure to reach the cluster and
// 503 are errUnreachable, retryable; 401 and 403 are sdk.Permanent (credentials no retry
// fixes); 413 is errTooLarge, permanent; 429 and other 5xx are retryable; other statuses
// are returned to the caller.
func (c *client) do(ctx context.Context, method, path, ctype string, body []byte) (int, []byte, error) {
	what := method + " " + c.where + path
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, sdk.Permanent(fmt.Errorf("elasticsearch sink: %s: %s", what, sdk.RedactURLError(err)))
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("elasticsearch sink: %s: cannot reach the cluster (plugin_config.url): %s: %w", what, sdk.RedactURLError(err), errUnreachable)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("elasticsearch sink: %s: reading the answer: %s: %w", what, sdk.RedactURLError(err), errUnreachable)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return resp.StatusCode, data, sdk.Permanent(fmt.Errorf("elasticsearch sink: %s: 401: the cluster refused the credentials%s (plugin_config.username and password, or api_key): %s", what, c.user(), reason(data)))
	case resp.StatusCode == http.StatusForbidden:
		return resp.StatusCode, data, sdk.Permanent(fmt.Errorf("elasticsearch sink: %s: 403: the user%s may not do this: %s", what, c.user(), reason(data)))
	case resp.StatusCode == http.StatusRequestEntityTooLarge:
		return resp.StatusCode, data, sdk.Permanent(fmt.Errorf("elasticsearch sink: %s: 413: the request is larger than the cluster takes (lower plugin_config.max_bulk_bytes, or raise the cluster's http.max_content_length): %w", what, errTooLarge))
	case resp.StatusCode == http.StatusServiceUnavailable:
		return resp.StatusCode, data, fmt.Errorf("elasticsearch sink: %s: 503: %s: %w", what, reason(data), errUnreachable)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return resp.StatusCode, data, fmt.Errorf("elasticsearch sink: %s: %d: %s", what, resp.StatusCode, reason(data))
	}
	return resp.StatusCode, data, nil
}

type nodeInfo struct {
	Version struct {
		Number       string `json:"number"`
		Distribution string `json:"distribution"`
	} `json:"version"`
}

func (n nodeInfo) distribution() string {
	if n.Version.Distribution != "" {
		return n.Version.Distribution
	}
	return "elasticsearch"
}

// info is GET /: whether the cluster answers and takes the credentials.
func (c *client) info(ctx context.Context) (nodeInfo, error) {
	var n nodeInfo
	status, data, err := c.do(ctx, http.MethodGet, "/", "", nil)
	if err != nil {
		return n, err
	}
	if status != http.StatusOK {
		return n, sdk.Permanent(fmt.Errorf("elasticsearch sink: GET %s/: %d: %s", c.where, status, reason(data)))
	}
	if err := json.Unmarshal(data, &n); err != nil || n.Version.Number == "" {
		return n, sdk.Permanent(fmt.Errorf("elasticsearch sink: GET %s/ did not answer as Elasticsearch or OpenSearch does (no version.number): is plugin_config.url the cluster's HTTP address?", c.where))
	}
	return n, nil
}

func (c *client) indexExists(ctx context.Context, index string) (bool, error) {
	status, data, err := c.do(ctx, http.MethodHead, "/"+index, "", nil)
	if err != nil {
		return false, err
	}
	switch status {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, sdk.Permanent(fmt.Errorf("elasticsearch sink: HEAD %s/%s: %d: %s", c.where, index, status, reason(data)))
}

func (c *client) createIndex(ctx context.Context, index string, mapping json.RawMessage) error {
	var body []byte
	if len(mapping) > 0 && string(mapping) != "null" {
		body = mapping
	}
	status, data, err := c.do(ctx, http.MethodPut, "/"+index, "application/json", body)
	if err != nil {
		return err
	}
	if status == http.StatusOK || (status == http.StatusBadRequest && strings.Contains(string(data), "resource_already_exists_exception")) {
		return nil
	}
	return sdk.Permanent(fmt.Errorf("elasticsearch sink: create index %s at %s (plugin_config.index_mapping): %d: %s", index, c.where, status, reason(data)))
}

// item is one document of a _bulk request.
type item struct {
	offset uint64
	action []byte
	doc    []byte
}

type refusal struct {
	offset uint64
	err    error
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// result is one _bulk item's outcome.
type result struct {
	index  string
	status int
	reason string
}

// bulk sends items as one _bulk request and returns each item's outcome, in order.
func (c *client) bulk(ctx context.Context, items []item) ([]result, error) {
	var body bytes.Buffer
	for _, it := range items {
		body.Write(it.action)
		body.WriteByte('\n')
		body.Write(it.doc)
		body.WriteByte('\n')
	}
	status, data, err := c.do(ctx, http.MethodPost, "/_bulk", "application/x-ndjson", body.Bytes())
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, sdk.Permanent(fmt.Errorf("elasticsearch sink: POST %s/_bulk: %d: %s", c.where, status, reason(data)))
	}
	return parseBulk(data, len(items))
}

// parseBulk reads a _bulk answer's items: their count must be the request's.
func parseBulk(data []byte, n int) ([]result, error) {
	var resp struct {
		Items []map[string]struct {
			Index  string          `json:"_index"`
			Status int             `json:"status"`
			Error  json.RawMessage `json:"error"`
		} `json:"items"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("elasticsearch sink: the _bulk answer is not JSON: %w", err)
	}
	if len(resp.Items) != n {
		return nil, fmt.Errorf("elasticsearch sink: the _bulk answer has %d items for %d documents", len(resp.Items), n)
	}
	out := make([]result, n)
	for i, it := range resp.Items {
		for _, r := range it { // one action per item
			out[i] = result{index: r.Index, status: r.Status}
			if len(r.Error) > 0 {
				out[i].reason = errorReason(r.Error)
			}
		}
		if out[i].status == 0 {
			return nil, fmt.Errorf("elasticsearch sink: the _bulk answer's item %d has no status", i)
		}
	}
	return out, nil
}

// errorReason renders an Elasticsearch error object as "type: reason" (caused_by's too).
func errorReason(raw json.RawMessage) string {
	var e struct {
		Type     string `json:"type"`
		Reason   string `json:"reason"`
		CausedBy *struct {
			Type   string `json:"type"`
			Reason string `json:"reason"`
		} `json:"caused_by"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Type == "" {
		return sanitize(string(raw))
	}
	s := e.Type + ": " + e.Reason
	if e.CausedBy != nil {
		s += " (caused by " + e.CausedBy.Type + ": " + e.CausedBy.Reason + ")"
	}
	return sanitize(s)
}

// reason is a failed request's answer, short: its error, or its text.
func reason(data []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && len(e.Error) > 0 {
		if e.Error[0] == '"' {
			var s string
			_ = json.Unmarshal(e.Error, &s)
			return sanitize(s)
		}
		return errorReason(e.Error)
	}
	if len(data) == 0 {
		return "(no body)"
	}
	return sanitize(string(data))
}

// actionLine is the _bulk "index" action of one document (no _id: the cluster picks one).
func actionLine(index, id string) []byte {
	b := make([]byte, 0, 48+len(index)+len(id))
	b = append(b, `{"index":{"_index":`...)
	b = appendJSONString(b, index)
	if id != "" {
		b = append(b, `,"_id":`...)
		b = appendJSONString(b, id)
	}
	return append(b, "}}"...)
}

func appendJSONString(b []byte, s string) []byte { return append(b, jsonString(s)...) }

// sanitize keeps a reason short enough for a log line.
func sanitize(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
