package elasticsearch

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/internal/searchtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests' node (scripts/opensearch.sh start), read back with curl (searchtest): the
// test is skipped when FERRY_OPENSEARCH_URL is unset and fails when it is set and nothing
// answers there.
var nodes sync.Map // testing.TB → *searchtest.Node

func node(t testing.TB) string {
	t.Helper()
	n := searchtest.Connect(t)
	nodes.Store(t, n)
	t.Cleanup(func() { nodes.Delete(t) })
	return n.URL
}

func nodeOf(t testing.TB) *searchtest.Node {
	n, ok := nodes.Load(t)
	if !ok {
		t.Fatal("node(t) first")
	}
	return n.(*searchtest.Node)
}

// indexName is a fresh index name for the test, deleted when it ends.
func indexName(t testing.TB) string { return nodeOf(t).Index(t) }

func curl(url, method, body string) ([]byte, error) { return searchtest.Curl(url, method, body) }

// search refreshes index and returns every document in it, by _id.
func search(t testing.TB, _ string, index string) map[string]json.RawMessage {
	t.Helper()
	docs := map[string]json.RawMessage{}
	for _, h := range nodeOf(t).All(t, index) {
		docs[h.ID] = h.Source
	}
	return docs
}

func count(t testing.TB, _ string, index string) int { return nodeOf(t).MustCount(t, index) }

func status(t testing.TB, url, method string) int { return searchtest.Status(t, url, method) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
