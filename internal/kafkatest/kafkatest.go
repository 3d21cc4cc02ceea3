// Package kafkatest connects tests to the Kafka broker of scripts/kafka.sh (Apache Kafka in
// KRaft mode on loopback): fresh topics per test, records produced with franz-go, and a
// topic read back read_committed by kafka-python (readcommitted.py), a client nobody here
// wrote. It knows franz-go only.
package kafkatest

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

//go:embed readcommitted.py
var readCommitted []byte

// Broker is the broker under test.
type Broker struct {
	Bootstrap string
	// SASL: the SASL_PLAINTEXT listener and its user (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
	SASLBootstrap, User, Password string
	// TLS: the SSL listener and the CA that signed its certificate.
	TLSBootstrap, CAFile string
	// Limited is a user of SASLBootstrap (PLAIN and SCRAM) who is not a super user: a test
	// denies it rights with ACLs.
	Limited, LimitedPassword string
	Dir                      string
	Python                   string // kafka-python's interpreter (scripts/kafka.sh python)
	Admin                    *kadm.Client
	Client                   *kgo.Client
	lock                     *os.File // restart.lock, held shared while the test runs
}

// Connect returns the broker of FERRY_KAFKA_BOOTSTRAP. The test is skipped when the
// variable is unset (`eval "$(bash scripts/kafka.sh start)"` sets it; CI does) and fails
// when it is set but the broker does not answer, or FERRY_KAFKA_PYTHON is missing.
func Connect(t testing.TB) *Broker {
	t.Helper()
	bs := os.Getenv("FERRY_KAFKA_BOOTSTRAP")
	if bs == "" {
		t.Skip("FERRY_KAFKA_BOOTSTRAP is not set: run `eval \"$(bash scripts/kafka.sh start)\"` for the Kafka tests")
	}
	b := &Broker{Bootstrap: bs, SASLBootstrap: os.Getenv("FERRY_KAFKA_SASL_BOOTSTRAP"),
		User: os.Getenv("FERRY_KAFKA_SASL_USER"), Password: os.Getenv("FERRY_KAFKA_SASL_PASSWORD"),
		TLSBootstrap: os.Getenv("FERRY_KAFKA_TLS_BOOTSTRAP"), CAFile: os.Getenv("FERRY_KAFKA_TLS_CA"),
		Dir: os.Getenv("FERRY_KAFKA_DIR"), Python: os.Getenv("FERRY_KAFKA_PYTHON"),
		Limited: os.Getenv("FERRY_KAFKA_LIMITED_USER"), LimitedPassword: os.Getenv("FERRY_KAFKA_LIMITED_PASSWORD")}
	if b.Python == "" {
		t.Fatal("FERRY_KAFKA_BOOTSTRAP is set but FERRY_KAFKA_PYTHON is not: run `eval \"$(bash scripts/kafka.sh python)\"` (the tests' reader)")
	}
	// A test that restarts the broker (Restart) holds this lock exclusively meanwhile, so
	// the tests of other packages, run at the same time, never see it down.
	if b.Dir != "" {
		f, err := os.OpenFile(filepath.Join(b.Dir, "restart.lock"), os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatalf("restart lock: %v", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
			t.Fatalf("restart lock: %v", err)
		}
		b.lock = f
		t.Cleanup(func() { _ = f.Close() })
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("FERRY_KAFKA_BOOTSTRAP=%s is set but the broker does not answer: %v", bs, err)
	}
	b.Client, b.Admin = cl, kadm.NewClient(cl)
	return b
}

// ACLs creates acls (as the super user of the plain listener) and deletes them at the end
// of the test: ALLOW or DENY ACLs for the limited user. A test that needs the limited user
// fails when the broker was started without one (an older scripts/kafka.sh).
func (b *Broker) ACLs(t testing.TB, acls *kadm.ACLBuilder) {
	t.Helper()
	if b.Limited == "" {
		t.Fatal("FERRY_KAFKA_LIMITED_USER is not set: start the broker with the current scripts/kafka.sh (ACLs on)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := b.Admin.CreateACLs(ctx, acls)
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		t.Fatalf("create ACLs: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = b.Admin.DeleteACLs(ctx, acls)
	})
}

var seq atomic.Uint64

// Name returns a topic (or group) name unique to this test and process.
func Name(t testing.TB, what string) string {
	n := strings.NewReplacer("/", ".", " ", "_", "#", "_").Replace(t.Name())
	if len(n) > 100 {
		n = n[len(n)-100:]
	}
	return fmt.Sprintf("%s.%s.%d.%d", what, n, os.Getpid(), seq.Add(1))
}

// Topic creates a topic of partitions partitions, deleted at the end of the test.
func (b *Broker) Topic(t testing.TB, partitions int32) string {
	t.Helper()
	name := Name(t, "t")
	b.CreateTopic(t, name, partitions)
	return name
}

// CreateTopic creates topic name, deleted at the end of the test.
func (b *Broker) CreateTopic(t testing.TB, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := b.Admin.CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	// A topic just created takes a moment to be served: wait until each partition has a
	// leader that answers.
	for {
		ends, err := b.Admin.ListEndOffsets(ctx, name)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("topic %s created but not served: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond) // a poll of the broker's metadata, bounded by ctx
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = b.Admin.DeleteTopics(ctx, name)
	})
}

// Produce writes recs and waits for the broker's acknowledgement.
func (b *Broker) Produce(t testing.TB, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.Client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records: %v", len(recs), err)
	}
}

// Record is one record as kafka-python read it.
type Record struct {
	Partition int32
	Offset    int64
	Key       []byte // nil: no key
	Value     []byte
	Headers   [][2]string // name, value
}

// Header returns the value of the first header named name.
func (r Record) Header(name string) (string, bool) {
	for _, h := range r.Headers {
		if h[0] == name {
			return h[1], true
		}
	}
	return "", false
}

// ReadCommitted reads topic from its start to its last stable offset with kafka-python,
// read_committed: what a consumer of the topic sees.
func (b *Broker) ReadCommitted(ctx context.Context, topic string) ([]Record, error) {
	dir, err := os.MkdirTemp("", "kafkatest")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	script := filepath.Join(dir, "readcommitted.py")
	if err := os.WriteFile(script, readCommitted, 0o644); err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, b.Python, script, b.Bootstrap, topic)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kafka-python read of %s: %w: %s", topic, err, stderr.String())
	}
	var recs []Record
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var raw struct {
			Partition int32       `json:"partition"`
			Offset    int64       `json:"offset"`
			Key       *string     `json:"key"`
			Value     *string     `json:"value"`
			Headers   [][2]string `json:"headers"`
		}
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			return nil, fmt.Errorf("kafka-python line %q: %w", sc.Text(), err)
		}
		r := Record{Partition: raw.Partition, Offset: raw.Offset}
		if raw.Key != nil {
			r.Key, _ = base64.StdEncoding.DecodeString(*raw.Key)
		}
		if raw.Value != nil {
			r.Value, _ = base64.StdEncoding.DecodeString(*raw.Value)
		}
		for _, h := range raw.Headers {
			v, _ := base64.StdEncoding.DecodeString(h[1])
			r.Headers = append(r.Headers, [2]string{h[0], string(v)})
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}

// Restart stops the broker (SIGTERM) and starts it again on its ports and data, holding
// the restart lock exclusively meanwhile (other packages' tests wait in Connect).
func (b *Broker) Restart(t testing.TB) {
	t.Helper()
	b.Outage(t, nil)
}

// Outage stops the broker, calls whileDown (nil: nothing), and starts it again on its
// ports and data, holding the restart lock exclusively meanwhile (other packages' tests
// wait in Connect, and this one's other connections see it down).
func (b *Broker) Outage(t testing.TB, whileDown func()) {
	t.Helper()
	if b.lock == nil {
		t.Fatal("FERRY_KAFKA_DIR is not set: the broker cannot be restarted")
	}
	if err := syscall.Flock(int(b.lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("restart lock: %v", err)
	}
	defer func() { _ = syscall.Flock(int(b.lock.Fd()), syscall.LOCK_SH) }()
	script := filepath.Join(repoRoot(t), "scripts", "kafka.sh")
	if out, err := exec.Command("bash", script, "down").CombinedOutput(); err != nil {
		t.Fatalf("kafka.sh down: %v\n%s", err, out)
	}
	if whileDown != nil {
		whileDown()
	}
	if out, err := exec.Command("bash", script, "up").CombinedOutput(); err != nil {
		t.Fatalf("kafka.sh up: %v\n%s", err, out)
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
