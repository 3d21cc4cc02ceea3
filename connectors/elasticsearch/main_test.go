package elasticsearch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node returns the test node's URL (scripts/opensearch.sh start): the test is skipped
// when FERRY_OPENSEARCH_URL is unset and fails when it is set and nothing answers there.
func node(t testing.TB) string {
	t.Helper()
	url := os.Getenv("FERRY_OPENSEARCH_URL")
	if url == "" {
		t.Skip("FERRY_OPENSEARCH_URL is not set (eval \"$(bash scripts/opensearch.sh start)\")")
	}
	if _, err := curl(url+"/", "GET", ""); err != nil {
		t.Fatalf("FERRY_OPENSEARCH_URL is set but the node does not answer: %v", err)
	}
	return url
}

var seq atomic.Int64

// indexName is a fresh index name for the test; the indexes it starts are deleted when
// the test ends (a node of many indexes starts slowly).
func indexName(t testing.TB) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	index := fmt.Sprintf("ferry-%s-%d-%d", name, time.Now().UnixNano()%1e9, seq.Add(1))
	if url := os.Getenv("FERRY_OPENSEARCH_URL"); url != "" {
		t.Cleanup(func() { _, _ = curl(url+"/"+index+"*", "DELETE", "") })
	}
	return index
}

// curl is the tests' reader: curl, an HTTP client nobody here wrote, against the node's
// REST API.
func curl(url, method, body string) ([]byte, error) {
	args := []string{"-sS", "--max-time", "60", "-X", method, "-H", "Content-Type: application/json", url}
	if body != "" {
		args = append(args, "--data-binary", body)
	}
	out, err := exec.Command("curl", args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("curl %s %s: %w: %s", method, url, err, out)
	}
	return out, nil
}

type hit struct {
	ID     string          `json:"_id"`
	Source json.RawMessage `json:"_source"`
}

// search refreshes index and returns every document in it, by _id.
func search(t testing.TB, url, index string) map[string]json.RawMessage {
	t.Helper()
	if _, err := curl(url+"/"+index+"/_refresh", "POST", ""); err != nil {
		t.Fatal(err)
	}
	out, err := curl(url+"/"+index+"/_search?size=10000", "GET", `{"query":{"match_all":{}}}`)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Hits struct {
			Total struct {
				Value int `json:"value"`
			} `json:"total"`
			Hits []hit `json:"hits"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("search %s: %v: %s", index, err, out)
	}
	if r.Hits.Total.Value > len(r.Hits.Hits) {
		t.Fatalf("search %s: %d documents, more than one page", index, r.Hits.Total.Value)
	}
	docs := map[string]json.RawMessage{}
	for _, h := range r.Hits.Hits {
		docs[h.ID] = h.Source
	}
	return docs
}

// count refreshes index and returns its _count.
func count(t testing.TB, url, index string) int {
	t.Helper()
	if _, err := curl(url+"/"+index+"/_refresh", "POST", ""); err != nil {
		t.Fatal(err)
	}
	out, err := curl(url+"/"+index+"/_count", "GET", "")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Count *int `json:"count"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Count == nil {
		t.Fatalf("count %s: %v: %s", index, err, out)
	}
	return *r.Count
}

// status is the HTTP status of a request to the node, by curl.
func status(t testing.TB, url, method string) int {
	t.Helper()
	args := []string{"-s", "--max-time", "60", "-o", "/dev/null", "-w", "%{http_code}", "-X", method, url}
	if method == "HEAD" {
		args = []string{"-s", "--max-time", "60", "-I", "-o", "/dev/null", "-w", "%{http_code}", url} // -X HEAD waits for a body
	}
	out, err := exec.Command("curl", args...).Output()
	if err != nil {
		t.Fatalf("curl %s %s: %v", method, url, err)
	}
	var code int
	_, _ = fmt.Sscan(string(out), &code)
	return code
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
