// Package mongotest connects tests to the MongoDB-compatible server of scripts/ferretdb.sh
// (FerretDB on SQLite, on loopback, with authentication on): a database per test, and a
// collection read back by pymongo (readdocs.py), a client nobody here wrote. It knows the
// MongoDB Go driver only.
package mongotest

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
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

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

//go:embed readdocs.py
var readDocs []byte

// Server is the server under test.
type Server struct {
	URI, User, Password string
	Dir                 string // scripts/ferretdb.sh's directory: its pid, port and data
	Python              string // pymongo's interpreter (scripts/ferretdb.sh pymongo)
	Client              *mongo.Client
	lock                *os.File // restart.lock, held shared while the test runs
}

// Connect returns the server of FERRY_MONGODB_URI. The test is skipped when the variable
// is unset (`eval "$(bash scripts/ferretdb.sh start)"` sets it; CI does) and fails when it
// is set but the server does not answer, or FERRY_PYMONGO_PYTHON is missing.
func Connect(t testing.TB) *Server {
	t.Helper()
	uri := os.Getenv("FERRY_MONGODB_URI")
	if uri == "" {
		t.Skip("FERRY_MONGODB_URI is not set: run `eval \"$(bash scripts/ferretdb.sh start)\"` for the MongoDB tests")
	}
	s := &Server{URI: uri, User: os.Getenv("FERRY_MONGODB_USER"), Password: os.Getenv("FERRY_MONGODB_PASSWORD"),
		Dir: os.Getenv("FERRY_MONGODB_DIR"), Python: os.Getenv("FERRY_PYMONGO_PYTHON")}
	if s.Python == "" {
		t.Fatal("FERRY_MONGODB_URI is set but FERRY_PYMONGO_PYTHON is not: run `eval \"$(bash scripts/ferretdb.sh pymongo)\"` (the tests' reader)")
	}
	// A test that restarts the server holds this lock exclusively meanwhile, so the tests
	// of other packages, run at the same time, never see it down.
	if s.Dir != "" {
		f, err := os.OpenFile(filepath.Join(s.Dir, "restart.lock"), os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatalf("restart lock: %v", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
			t.Fatalf("restart lock: %v", err)
		}
		s.lock = f
		t.Cleanup(func() { _ = f.Close() })
	}
	cl, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(20 * time.Second))
	if err != nil {
		t.Fatalf("FERRY_MONGODB_URI: %v", err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Ping(ctx, nil); err != nil {
		t.Fatalf("FERRY_MONGODB_URI is set but the server does not answer: %v", err)
	}
	s.Client = cl
	return s
}

var seq atomic.Uint64

// Database returns a database name unique to this test and process, dropped at the end
// of the test.
func (s *Server) Database(t testing.TB) string {
	t.Helper()
	n := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	name := fmt.Sprintf("t_%s_%d_%d", n, os.Getpid(), seq.Add(1))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Client.Database(name).Drop(ctx)
	})
	return name
}

// CreateCollection creates db.coll with opts (a validator, say).
func (s *Server) CreateCollection(t testing.TB, db, coll string, opts ...options.Lister[options.CreateCollectionOptions]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Client.Database(db).CreateCollection(ctx, coll, opts...); err != nil {
		t.Fatalf("create collection %s.%s: %v", db, coll, err)
	}
}

// Count returns how many documents db.coll holds (the Go driver's count: for waits).
func (s *Server) Count(ctx context.Context, db, coll string) (int64, error) {
	return s.Client.Database(db).Collection(coll).CountDocuments(ctx, bson.D{})
}

// Doc is one document as pymongo read it: its fields in canonical Extended JSON, and
// their names in the stored order.
type Doc struct {
	Keys   []string                   `json:"keys"`
	Fields map[string]json.RawMessage `json:"doc"`
}

// ID returns the document's _id, a string.
func (d Doc) ID() string {
	var id string
	_ = json.Unmarshal(d.Fields["_id"], &id)
	return id
}

// Int returns field k as an integer ({"$numberInt": ...} or {"$numberLong": ...}) and
// which of the two it is ("int32", "int64"); false when it is neither.
func (d Doc) Int(k string) (int64, string, bool) {
	var v struct {
		Int  *string `json:"$numberInt"`
		Long *string `json:"$numberLong"`
	}
	if json.Unmarshal(d.Fields[k], &v) != nil {
		return 0, "", false
	}
	var n int64
	switch {
	case v.Int != nil:
		_, err := fmt.Sscan(*v.Int, &n)
		return n, "int32", err == nil
	case v.Long != nil:
		_, err := fmt.Sscan(*v.Long, &n)
		return n, "int64", err == nil
	}
	return 0, "", false
}

// Binary returns field k's bytes when it is BSON binary of subtype 0.
func (d Doc) Binary(k string) ([]byte, bool) {
	var v struct {
		Binary *struct {
			Base64  []byte `json:"base64"`
			SubType string `json:"subType"`
		} `json:"$binary"`
	}
	if json.Unmarshal(d.Fields[k], &v) != nil || v.Binary == nil || v.Binary.SubType != "00" {
		return nil, false
	}
	return v.Binary.Base64, true
}

// Read returns every document of db.coll as pymongo reads it, in _id order.
func (s *Server) Read(ctx context.Context, db, coll string) ([]Doc, error) {
	dir, err := os.MkdirTemp("", "mongotest")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	script := filepath.Join(dir, "readdocs.py")
	if err := os.WriteFile(script, readDocs, 0o644); err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, s.Python, script, s.URI, db, coll)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("pymongo read of %s.%s: %w: %s", db, coll, err, stderr.String())
	}
	var docs []Doc
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var d Doc
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			return nil, fmt.Errorf("pymongo read of %s.%s: line %q: %w", db, coll, sc.Bytes(), err)
		}
		docs = append(docs, d)
	}
	return docs, sc.Err()
}

// Restart kills the server (SIGKILL) and starts it again on its port and data, holding
// the restart lock exclusively meanwhile (other packages' tests wait in Connect).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.lock == nil {
		t.Fatal("FERRY_MONGODB_DIR is not set: the server cannot be restarted")
	}
	if err := syscall.Flock(int(s.lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("restart lock: %v", err)
	}
	defer func() { _ = syscall.Flock(int(s.lock.Fd()), syscall.LOCK_SH) }()
	script := filepath.Join(repoRoot(t), "scripts", "ferretdb.sh")
	if out, err := exec.Command("bash", script, "restart").CombinedOutput(); err != nil {
		t.Fatalf("ferretdb.sh restart: %v\n%s", err, out)
	}
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
