// Package webhooktest is a real HTTP receiver for the HTTP sink's tests: an HTTP server on
// a loopback port that records every request, answers each as a schedule says (accept,
// refuse with a status and an optional Retry-After, delay), and deduplicates the accepted
// ones by their idempotency key, as a receiver of webhooks does. It knows nothing of Ferry.
package webhooktest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Request is one request as the receiver got it.
type Request struct {
	N       int // from 1, in arrival order
	Method  string
	Path    string
	Key     string // the idempotency header's value
	Header  http.Header
	Body    []byte
	Status  int  // what the receiver answered
	Replay  bool // accepted before under the same key (answered with success, not kept again)
	Arrived time.Time
}

// Answer is what the schedule decides for one request.
type Answer struct {
	Status     int           // 0: 200
	RetryAfter string        // a Retry-After header to send with it
	Delay      time.Duration // wait this long before answering
}

// Receiver is the server. Safe for concurrent use.
type Receiver struct {
	srv      *httptest.Server
	header   string
	schedule func(n int, r *Request) Answer

	mu       sync.Mutex
	requests []Request
	accepted map[string][]byte // key → body accepted under it
	order    []string          // keys in the order first accepted
}

// Start starts a receiver whose idempotency header is header (Idempotency-Key when "");
// schedule (nil: accept all) answers each request. Close stops it.
func Start(header string, schedule func(n int, r *Request) Answer) *Receiver {
	if header == "" {
		header = "Idempotency-Key"
	}
	rc := &Receiver{header: header, schedule: schedule, accepted: map[string][]byte{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	return rc
}

// URL is the receiver's base URL.
func (rc *Receiver) URL() string { return rc.srv.URL }

// Close stops the server.
func (rc *Receiver) Close() { rc.srv.Close() }

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	req := Request{N: len(rc.requests) + 1, Method: r.Method, Path: r.URL.Path, Key: r.Header.Get(rc.header),
		Header: r.Header.Clone(), Body: body, Arrived: time.Now()}
	rc.mu.Unlock()
	var a Answer
	if rc.schedule != nil {
		a = rc.schedule(req.N, &req)
	}
	if a.Delay > 0 {
		select {
		case <-time.After(a.Delay):
		case <-r.Context().Done():
		}
	}
	status := a.Status
	if status == 0 {
		status = http.StatusOK
	}
	rc.mu.Lock()
	if status < 300 && req.Key != "" {
		if _, ok := rc.accepted[req.Key]; ok {
			req.Replay = true
		} else {
			rc.accepted[req.Key] = body
			rc.order = append(rc.order, req.Key)
		}
	}
	req.Status = status
	rc.requests = append(rc.requests, req)
	rc.mu.Unlock()
	if a.RetryAfter != "" {
		w.Header().Set("Retry-After", a.RetryAfter)
	}
	w.WriteHeader(status)
}

// Reset forgets every request and every key accepted (a new run against the same server).
func (rc *Receiver) Reset() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests, rc.accepted, rc.order = nil, map[string][]byte{}, nil
}

// Requests returns every request so far, in arrival order.
func (rc *Receiver) Requests() []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Request(nil), rc.requests...)
}

// Accepted returns the bodies accepted once per idempotency key, in the order each key
// was first accepted: what a deduplicating receiver keeps.
func (rc *Receiver) Accepted() [][]byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([][]byte, len(rc.order))
	for i, k := range rc.order {
		out[i] = rc.accepted[k]
	}
	return out
}

// Replays counts the successful requests whose key had been accepted before.
func (rc *Receiver) Replays() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, r := range rc.requests {
		if r.Replay {
			n++
		}
	}
	return n
}
