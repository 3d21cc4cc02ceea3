// Package searchtest connects tests to the OpenSearch node of scripts/opensearch.sh and
// reads it back with curl, an HTTP client nobody here wrote: _count, _search, index
// status. It knows the standard library only.
package searchtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Node is the node under test.
type Node struct {
	URL  string
	Dir  string   // scripts/opensearch.sh's directory: its pid, port and data
	lock *os.File // restart.lock, held shared while the test runs
}

// Connect returns the node of FERRY_OPENSEARCH_URL. The test is skipped when the variable
// is unset (`eval "$(bash scripts/opensearch.sh start)"` sets it; CI does) and fails when
// it is set but the node does not answer. While the test runs it holds the node's restart
// lock shared: a test that restarts the node (Restart) waits for the others, and they for
// it, so no package's test ever sees the node down by surprise.
func Connect(t testing.TB) *Node {
	t.Helper()
	url := os.Getenv("FERRY_OPENSEARCH_URL")
	if url == "" {
		t.Skip("FERRY_OPENSEARCH_URL is not set: run `eval \"$(bash scripts/opensearch.sh start)\"` for the OpenSearch tests")
	}
	n := &Node{URL: strings.TrimRight(url, "/"), Dir: os.Getenv("FERRY_OPENSEARCH_DIR")}
	if n.Dir != "" {
		f, err := os.OpenFile(filepath.Join(n.Dir, "restart.lock"), os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatalf("restart lock: %v", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
			t.Fatalf("restart lock: %v", err)
		}
		n.lock = f
		t.Cleanup(func() { _ = f.Close() })
	}
	if _, err := Curl(n.URL+"/_cluster/health?wait_for_status=yellow&timeout=60s", "GET", ""); err != nil {
		t.Fatalf("FERRY_OPENSEARCH_URL is set but the node does not answer: %v", err)
	}
	return n
}

var seq atomic.Int64

// Index returns an index name unique to this test and process; the indexes whose names
// start with it are deleted when the test ends (a node of many indexes starts slowly).
func (n *Node) Index(t testing.TB) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", "#", "-").Replace(t.Name()))
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	index := fmt.Sprintf("ferry-%s-%d-%d", strings.TrimLeft(name, "-_"), os.Getpid(), seq.Add(1))
	t.Cleanup(func() { _, _ = Curl(n.URL+"/"+index+"*", "DELETE", "") })
	return index
}

// Curl runs curl against the node's REST API and returns the answer's body.
func Curl(url, method, body string) ([]byte, error) {
	args := []string{"-sS", "--max-time", "120", "-X", method, "-H", "Content-Type: application/json", url}
	if body != "" {
		args = append(args, "--data-binary", body)
	}
	out, err := exec.Command("curl", args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("curl %s %s: %w: %s", method, url, err, out)
	}
	return out, nil
}

// Status is the HTTP status of a request to the node, by curl.
func Status(t testing.TB, url, method string) int {
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

// Count refreshes index and returns its _count, or an error (for waits).
func (n *Node) Count(index string) (int, error) {
	if _, err := Curl(n.URL+"/"+index+"/_refresh", "POST", ""); err != nil {
		return 0, err
	}
	out, err := Curl(n.URL+"/"+index+"/_count", "GET", "")
	if err != nil {
		return 0, err
	}
	var r struct {
		Count *int `json:"count"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, fmt.Errorf("count %s: %w: %s", index, err, out)
	}
	if r.Count == nil {
		return 0, fmt.Errorf("count %s: no count in %s", index, out)
	}
	return *r.Count, nil
}

// MustCount is Count failing the test on an error.
func (n *Node) MustCount(t testing.TB, index string) int {
	t.Helper()
	c, err := n.Count(index)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Hit is one document: its _id and _source.
type Hit struct {
	ID     string          `json:"_id"`
	Source json.RawMessage `json:"_source"`
	Sort   []any           `json:"sort"`
}

// All refreshes index and returns every document in it, read in pages of 5,000 sorted by
// sortBy (fields every document has, e.g. "_iggy_partition", "_iggy_offset"; none: one
// page, at most 10,000 documents).
func (n *Node) All(t testing.TB, index string, sortBy ...string) []Hit {
	t.Helper()
	if _, err := Curl(n.URL+"/"+index+"/_refresh", "POST", ""); err != nil {
		t.Fatal(err)
	}
	var out []Hit
	var after []any
	for {
		q := map[string]any{"query": map[string]any{"match_all": map[string]any{}}, "size": 10000, "track_total_hits": true}
		if len(sortBy) > 0 {
			var sort []any
			for _, f := range sortBy {
				sort = append(sort, map[string]any{f: "asc"})
			}
			q["sort"], q["size"] = sort, 5000
			if after != nil {
				q["search_after"] = after
			}
		}
		body, _ := json.Marshal(q)
		raw, err := Curl(n.URL+"/"+index+"/_search", "POST", string(body))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Hits struct {
				Total struct {
					Value int `json:"value"`
				} `json:"total"`
				Hits []Hit `json:"hits"`
			} `json:"hits"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("search %s: %v: %.500s", index, err, raw)
		}
		out = append(out, r.Hits.Hits...)
		if len(sortBy) == 0 {
			if r.Hits.Total.Value > len(r.Hits.Hits) {
				t.Fatalf("search %s: %d documents, more than one page", index, r.Hits.Total.Value)
			}
			return out
		}
		if len(r.Hits.Hits) == 0 {
			return out
		}
		after = r.Hits.Hits[len(r.Hits.Hits)-1].Sort
	}
}

// Restart kills the node (SIGKILL, a crash) and starts it again on its port and data,
// holding the restart lock exclusively meanwhile (other tests wait in Connect).
func (n *Node) Restart(t testing.TB) time.Duration {
	t.Helper()
	if n.lock == nil {
		t.Fatal("FERRY_OPENSEARCH_DIR is not set: the node cannot be restarted")
	}
	if err := syscall.Flock(int(n.lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("restart lock: %v", err)
	}
	defer func() { _ = syscall.Flock(int(n.lock.Fd()), syscall.LOCK_SH) }()
	start := time.Now()
	script := filepath.Join(repoRoot(t), "scripts", "opensearch.sh")
	if out, err := exec.Command("bash", script, "restart", "KILL").CombinedOutput(); err != nil {
		t.Fatalf("opensearch.sh restart: %v\n%s", err, out)
	}
	return time.Since(start)
}

func repoRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
