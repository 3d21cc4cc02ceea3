package http

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	nethttp "net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// maxRetryAfter caps the wait a Retry-After may ask for.
const maxRetryAfter = 10 * time.Minute

// Sink is the HTTP sink.
type Sink struct {
	cfg     config
	log     *slog.Logger
	client  *nethttp.Client
	headers nethttp.Header
	success map[int]bool
	pos     *sdk.Positions
	fail    sdk.OnFailure
	logURL  string
	retry   sdk.Retry

	requests  atomic.Uint64
	delivered atomic.Uint64
	failures  atomic.Uint64
}

// New returns an unopened HTTP sink.
func New() *Sink { return &Sink{} }

// Open parses the config, builds the client and, with health_check_enabled, sends the
// health check (an error names the URL and the status).
func (s *Sink) Open(ctx context.Context, env sdk.SinkEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(err)
	}
	s.cfg, s.fail, s.logURL = cfg, env.OnFailure, sdk.RedactURL(cfg.URL)
	s.log = env.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryDelay > cfg.MaxRetryDelay {
		s.log.Warn("http sink: retry_delay exceeds max_retry_delay; swapped, as upstream", "retry_delay", cfg.RetryDelay, "max_retry_delay", cfg.MaxRetryDelay)
		s.cfg.RetryDelay, s.cfg.MaxRetryDelay = cfg.MaxRetryDelay, cfg.RetryDelay
	}
	if cfg.TLSInsecure {
		s.log.Warn("http sink: tls_danger_accept_invalid_certs is on: the server's certificate is not verified")
	}
	if cfg.BatchMode == modeRaw && cfg.IncludeMetadata {
		s.log.Info("http sink: batch_mode raw sends payloads as they are; include_metadata does not apply")
	}
	if err := s.setup(); err != nil {
		return err
	}
	s.pos = sdk.NewPositions(env, nil)
	s.retry = sdk.Retry{Initial: s.cfg.RetryDelay, Max: s.cfg.MaxRetryDelay, Multiplier: float64(cfg.Multiplier),
		Attempts: cfg.MaxRetries + 1, Jitter: 0.1, What: "http request to " + s.logURL, Log: s.log}
	if cfg.HealthCheck {
		if err := s.healthCheck(ctx); err != nil {
			return err
		}
	}
	s.log.Info("http sink ready", "url", s.logURL, "method", cfg.Method, "batch_mode", cfg.BatchMode,
		"timeout", cfg.Timeout, "max_retries", cfg.MaxRetries, "idempotency_header", cfg.IdempotencyHeader)
	return nil
}

// setup builds what Open and Preflight share from s.cfg: the success statuses, the
// headers and the client.
func (s *Sink) setup() error {
	cfg := s.cfg
	s.success = map[int]bool{}
	for _, c := range cfg.SuccessCodes {
		s.success[c] = true
	}
	s.headers = nethttp.Header{}
	for k, v := range cfg.Headers {
		if strings.EqualFold(k, "Content-Type") {
			s.log.Warn("http sink: the Content-Type of plugin_config.headers is ignored; batch_mode sets it", "batch_mode", cfg.BatchMode)
			continue
		}
		if !validHeader(k, v) {
			return sdk.Permanent(fmt.Errorf("plugin_config.%s: %q is not a valid header", FieldHeaders, k))
		}
		s.headers.Set(k, v)
	}
	transport := nethttp.DefaultTransport.(*nethttp.Transport).Clone()
	transport.MaxIdleConnsPerHost = cfg.MaxConnections
	transport.IdleConnTimeout = 90 * time.Second
	transport.DialContext = (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext
	if cfg.TLSInsecure {
		transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the user's explicit, logged choice
	}
	s.client = &nethttp.Client{Timeout: cfg.Timeout, Transport: transport}
	return nil
}

func validHeader(k, v string) bool {
	if k == "" || strings.ContainsAny(k, " \t\r\n:()<>@,;\\\"/[]?={}") || strings.ContainsAny(v, "\r\n\x00") {
		return false
	}
	return true
}

func (s *Sink) healthCheck(ctx context.Context) error {
	status, err := s.ask(ctx, string(s.cfg.HealthCheckMethod))
	if err != nil {
		if errors.Is(err, sdk.ErrPermanent) {
			return err
		}
		return fmt.Errorf("http sink: health check %w", err)
	}
	if !s.success[status] {
		return fmt.Errorf("http sink: health check %s %s returned status %d (not in success_status_codes %v)",
			s.cfg.HealthCheckMethod, s.logURL, status, s.cfg.SuccessCodes)
	}
	return nil
}

// ask sends a request of method without a body and returns its status. A failed request's
// error keeps the client's cause (a certificate's, a resolver's) for errors.As.
func (s *Sink) ask(ctx context.Context, method string) (int, error) {
	req, err := nethttp.NewRequestWithContext(ctx, method, s.cfg.URL, nil)
	if err != nil {
		return 0, sdk.Permanent(fmt.Errorf("plugin_config.%s: %s", FieldURL, sdk.RedactURLError(err)))
	}
	req.Header = s.headers.Clone()
	resp, err := s.client.Do(req)
	if err != nil {
		cause := err
		var ue *url.Error
		if errors.As(err, &ue) {
			cause = ue.Err
		}
		return 0, fmt.Errorf("%s %s: %w", method, s.logURL, cause)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// MaxInFlight lets the runtime send max_connections partitions at once (max_in_flight).
func (s *Sink) MaxInFlight() int { return s.cfg.MaxConnections }

// Consume sends the batch (one request, or one per message in individual and raw modes)
// and commits what got a success status. A permanent refusal (a 4xx other than 408 and
// 429, a body over max_payload_size_bytes) is the whole batch's in the batch modes
// (sdk.Permanent) and the one message's in the per-message modes (sdk.RejectedMessages);
// a transient failure that outlasts max_retries fails Consume, and the runtime's retry
// sends the rest again under the same keys.
func (s *Sink) Consume(ctx context.Context, t sdk.TopicMetadata, m sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	fresh := s.pos.Fresh(m.Partition, msgs)
	if len(fresh) == 0 {
		return nil
	}
	if !s.cfg.BatchMode.perMessage() {
		return s.consumeBatch(ctx, t, m, fresh)
	}
	var rejected []uint64
	var rejectErr error
	for i := range fresh {
		msg := &fresh[i]
		var body []byte
		if s.cfg.BatchMode == modeRaw {
			body = msg.Payload
		} else {
			body = s.appendMessage(nil, t, m, msg)
		}
		err := s.sendChecked(ctx, body, s.key(t, m.Partition, msg, msg))
		if err == nil {
			s.delivered.Add(1)
			continue
		}
		if !errors.Is(err, sdk.ErrPermanent) {
			if i > 0 { // what got through is done; the retry starts at this message
				if cerr := s.done(m.Partition, fresh[i-1].Offset); cerr != nil {
					return cerr
				}
			}
			s.pos.Rewind(m.Partition, msg.Offset)
			return err
		}
		rejected = append(rejected, msg.Offset)
		if rejectErr == nil {
			rejectErr = fmt.Errorf("offset %d: %w", msg.Offset, err)
		}
		if !s.fail.MayPassRejected() {
			if i > 0 {
				if cerr := s.done(m.Partition, fresh[i-1].Offset); cerr != nil {
					return cerr
				}
			}
			return &sdk.RejectedMessages{Offsets: rejected, Err: rejectErr}
		}
	}
	if err := s.done(m.Partition, fresh[len(fresh)-1].Offset); err != nil {
		return err
	}
	if len(rejected) > 0 {
		return &sdk.RejectedMessages{Offsets: rejected, Err: rejectErr}
	}
	return nil
}

func (s *Sink) consumeBatch(ctx context.Context, t sdk.TopicMetadata, m sdk.MessagesMetadata, fresh []sdk.ConsumedMessage) error {
	body := make([]byte, 0, 64*len(fresh)+len(fresh)*len(fresh[0].Payload))
	if s.cfg.BatchMode == modeJSONArray {
		body = append(body, '[')
	}
	for i := range fresh {
		if i > 0 && s.cfg.BatchMode == modeJSONArray {
			body = append(body, ',')
		}
		body = s.appendMessage(body, t, m, &fresh[i])
		if s.cfg.BatchMode == modeNDJSON {
			body = append(body, '\n')
		}
	}
	if s.cfg.BatchMode == modeJSONArray {
		body = append(body, ']')
	}
	first, last := &fresh[0], &fresh[len(fresh)-1]
	if err := s.sendChecked(ctx, body, s.key(t, m.Partition, first, last)); err != nil {
		s.pos.Rewind(m.Partition, first.Offset)
		return err
	}
	s.delivered.Add(uint64(len(fresh)))
	return s.done(m.Partition, last.Offset)
}

// done commits p up to last (sink_controlled); a partition the sink lost is no error.
func (s *Sink) done(p sdk.Partition, last uint64) error {
	if err := s.pos.Durable(p, last); err != nil && !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		return err
	}
	return nil
}

// key is a request's idempotency key: stream/topic/partition/first-last/timestamp, names
// escaped as URL path segments, the timestamp the first message's (µs): the same messages
// always give the same key, and a topic purged or made again (offsets from 0) gives new ones.
func (s *Sink) key(t sdk.TopicMetadata, p sdk.Partition, first, last *sdk.ConsumedMessage) string {
	return url.PathEscape(t.Stream) + "/" + url.PathEscape(t.Topic) + "/" + strconv.FormatUint(uint64(p.PartitionID), 10) + "/" +
		strconv.FormatUint(first.Offset, 10) + "-" + strconv.FormatUint(last.Offset, 10) + "/" + strconv.FormatUint(first.Timestamp, 10)
}

// sendChecked sends one body under key with the retry, after the size check.
func (s *Sink) sendChecked(ctx context.Context, body []byte, key string) error {
	if s.cfg.MaxPayload > 0 && uint64(len(body)) > s.cfg.MaxPayload {
		s.failures.Add(1)
		return sdk.Permanent(fmt.Errorf("a request body of %d bytes is over max_payload_size_bytes (%d)", len(body), s.cfg.MaxPayload))
	}
	err := s.retry.Do(ctx, func(ctx context.Context, _ int) error { return s.send(ctx, body, key) })
	if err != nil {
		s.failures.Add(1)
	}
	return err
}

// statusError is a response whose status is not a success.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string {
	if e.body == "" {
		return fmt.Sprintf("status %d", e.code)
	}
	return fmt.Sprintf("status %d: %s", e.code, e.body)
}

// send makes one request. Its error steers the retry: a connection error or a 408, 429 or
// 5xx is retried (a Retry-After is waited, sdk.BackOff), any other status is permanent.
func (s *Sink) send(ctx context.Context, body []byte, key string) error {
	req, err := nethttp.NewRequestWithContext(ctx, string(s.cfg.Method), s.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return sdk.Permanent(fmt.Errorf("plugin_config.%s: %s", FieldURL, sdk.RedactURLError(err)))
	}
	req.Header = s.headers.Clone()
	req.Header.Set("Content-Type", s.cfg.BatchMode.contentType())
	req.Header.Set(s.cfg.IdempotencyHeader, key)
	s.requests.Add(1)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %s", s.cfg.Method, s.logURL, causeOf(err))
	}
	defer resp.Body.Close()
	if s.success[resp.StatusCode] {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // the connection is reused
		if s.cfg.Verbose {
			s.log.Debug("http sink: delivered", "status", resp.StatusCode, "bytes", len(body), "key", key)
		}
		return nil
	}
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	serr := fmt.Errorf("%s %s: %w", s.cfg.Method, s.logURL, &statusError{resp.StatusCode, strings.TrimSpace(string(text))})
	code := resp.StatusCode
	switch {
	case code == nethttp.StatusTooManyRequests || code == nethttp.StatusRequestTimeout || code >= 500:
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return sdk.BackOff(min(d, maxRetryAfter), serr)
		}
		return serr
	}
	return sdk.Permanent(serr)
}

// causeOf is a failed request's error without the URL it quotes (the caller names the
// redacted one).
func causeOf(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, true
	}
	if at, err := nethttp.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// Gauges reports the requests made, the messages delivered and the sends that failed.
func (s *Sink) Gauges() []sdk.Gauge {
	return []sdk.Gauge{
		{Name: "http_requests", Help: "HTTP requests sent, retries included", Value: s.requests.Load()},
		{Name: "http_delivered", Help: "messages delivered with a success status", Value: s.delivered.Load()},
		{Name: "http_failed_sends", Help: "sends that failed after their retries, or were refused for good", Value: s.failures.Load()},
	}
}

// Close releases idle connections.
func (s *Sink) Close(context.Context) error {
	if s.client == nil {
		return nil
	}
	s.client.CloseIdleConnections()
	s.log.Info("http sink closed", "requests", s.requests.Load(), "delivered", s.delivered.Load(), "failed_sends", s.failures.Load())
	return nil
}
