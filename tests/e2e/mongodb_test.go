package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/mongotest"
	"github.com/ferryio/ferry/internal/testkit"
)

// mongoRun is the size of one MongoDB run under SIGKILL. CI runs mongoSmall;
// FERRY_MONGODB_SOAK=1 (scripts/soak.sh) the full size.
type mongoRun struct {
	perPartition uint64
	kills        int
}

var (
	mongoSmall = mongoRun{perPartition: 1000, kills: 10}
	mongoSoak  = mongoRun{perPartition: 30000, kills: 10}
)

// mongoSink is the connector file of the MongoDB sink under test: JSON payloads stored as
// embedded documents, Iggy's stored offsets lagging the collection by seconds (so every
// kill makes the next run deliver again what is already there).
func mongoSink(key, uri, db, coll, onFailure, extra string) string {
	dl := ""
	if onFailure == "dead_letter" {
		dl = "\n[dead_letter]\nstream = \"dlq\"\ntopic = \"rejected\"\n"
	}
	return fmt.Sprintf(`type = "sink"
key = %q
enabled = true
version = 0
name = "mongodb"
path = "builtin:mongodb"
offset_commit = "sink_controlled"
on_failure = %q
%s
[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = 500
poll_interval = "5ms"

[commit]
interval = "2s"

[retry]
max_retries = 1000
initial_backoff = "50ms"

[plugin_config]
connection_uri = %q
database = %q
collection = %q
payload_format = "json"
auto_create_collection = true
retry_delay = "50ms"
connect_timeout = "5s"
%s`, key, onFailure, dl, uri, db, coll, extra)
}

// messageIDs polls every message of s/t's partitions 0..parts-1: their ids by (partition,
// offset), as the sink must have derived the _id from them.
func messageIDs(t *testing.T, c *iggy.Client, parts uint32) map[[2]uint64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := map[[2]uint64]string{}
	for p := range parts {
		next := uint64(0)
		for {
			r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(12)},
				Stream: iggy.Name("s"), Topic: iggy.Name("t"), Partition: &p, Strategy: wire.PollOffset(next), Count: 5000})
			if err != nil {
				t.Fatalf("poll partition %d at %d: %v", p, next, err)
			}
			if len(r.Messages) == 0 {
				r.Release()
				break
			}
			for i := range r.Messages {
				m := &r.Messages[i]
				id := new(big.Int).Lsh(new(big.Int).SetUint64(m.ID.Hi), 64)
				id.Or(id, new(big.Int).SetUint64(m.ID.Lo))
				out[[2]uint64{uint64(p), m.Offset}] = id.String()
				next = m.Offset + 1
			}
			r.Release()
		}
	}
	return out
}

// judgeMongo reads db.coll with pymongo: exactly parts × per documents, one for each
// (partition, offset), its _id "s:t:partition:message_id" of that message, its payload
// the message's JSON as an embedded document.
func judgeMongo(t *testing.T, srv *mongotest.Server, db, coll string, ids map[[2]uint64]string, parts uint32, per uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	docs, err := srv.Read(ctx, db, coll)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]uint64]bool{}
	for _, d := range docs {
		p, _, ok1 := d.Int("iggy_partition_id")
		o, _, ok2 := d.Int("iggy_offset")
		var payload struct {
			P, O json.RawMessage
			Pad  string
		}
		if !ok1 || !ok2 || json.Unmarshal(d.Fields["payload"], &payload) != nil {
			t.Fatalf("document %s: partition %s offset %s payload %s", d.ID(), d.Fields["iggy_partition_id"], d.Fields["iggy_offset"], d.Fields["payload"])
		}
		key := [2]uint64{uint64(p), uint64(o)}
		if seen[key] {
			t.Fatalf("partition %d offset %d: two documents", p, o)
		}
		seen[key] = true
		if want := fmt.Sprintf("s:t:%d:%s", p, ids[key]); d.ID() != want {
			t.Fatalf("partition %d offset %d: _id %q, want %q", p, o, d.ID(), want)
		}
		wantP := fmt.Sprintf(`{"$numberLong":"%d"}`, p)
		wantO := fmt.Sprintf(`{"$numberLong":"%d"}`, o)
		if compactJSON(payload.P) != wantP || compactJSON(payload.O) != wantO || payload.Pad != fmt.Sprintf("%0*d", soakPad, 0) {
			t.Fatalf("partition %d offset %d: payload %s, want the message's", p, o, d.Fields["payload"])
		}
	}
	if want := int(parts) * int(per); len(docs) != want || len(seen) != want {
		t.Fatalf("%d documents, %d distinct (partition, offset); want %d", len(docs), len(seen), want)
	}
}

// compactJSON is raw without insignificant spaces (pymongo's Extended JSON has some).
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// mongoExactlyOnceUnderKills runs the MongoDB sink in ferry processes SIGKILLed
// size.kills times at seeded random moments while 3 partitions are produced, the server
// restarted (SIGKILL) once under a running process, then to the end: pymongo finds each
// message once, its _id its own, its payload intact.
func mongoExactlyOnceUnderKills(t *testing.T, size mongoRun) {
	srv := mongotest.Connect(t)
	db, coll := srv.Database(t), "events"
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, 3 × %d messages, %d kills", seed, size.perPartition, size.kills)
	rng := rand.New(rand.NewPCG(seed, 42))
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 3)
	conns := filepath.Join(dir, "mongo")
	writeFile(t, filepath.Join(conns, "sink.toml"), mongoSink("mongo", srv.URI, db, coll, "stop", ""))
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}

	var wg sync.WaitGroup
	var prodErr error
	// The production lasts about a second per kill, so the kills land while it flows.
	pause := time.Duration(size.kills) * time.Second / time.Duration(size.perPartition/100)
	wg.Go(func() { prodErr = produceN(c, 3, size.perPartition, pause) })
	total := 3 * size.perPartition
	share := total / uint64(size.kills+1)
	count := func() uint64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := srv.Count(ctx, db, coll)
		if err != nil {
			return 0
		}
		return uint64(n)
	}
	run := startFerry(t, "run 0", dir, nil, args...)
	var all []*proc
	restartAt := size.kills / 2
	for i := 1; i <= size.kills; i++ {
		before := count()
		testkit.WaitFor(t, fmt.Sprintf("run %d writing", i-1), func() bool {
			if run.exited() {
				t.Fatalf("run %d exited by itself: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
			}
			return count() > before+share/2 || count() >= total
		})
		if i == restartAt { // the server killed and started again under the running process
			srv.Restart(t)
			t.Logf("server restarted under run %d", i-1)
			after := count()
			testkit.WaitFor(t, "writing after the server's restart", func() bool {
				return count() > after || count() >= total
			})
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		run.kill()
		all = append(all, run)
		t.Logf("kill %d: %d documents", i, count())
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
	}
	wg.Wait()
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	testkit.WaitFor(t, "every message in the collection", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return count() >= total
	})
	run.stop(30 * time.Second)
	for _, r := range append(all, run) {
		if strings.Contains(r.out.String(), srv.Password) {
			t.Fatalf("%s logged the password", r.name)
		}
	}
	judgeMongo(t, srv, db, coll, messageIDs(t, c, 3), 3, size.perPartition)
	t.Logf("%d kills, 1 server restart: %d documents, 0 lost, 0 duplicated", size.kills, total)
}

// TestMongoDBExactlyOnceUnderSIGKILL: CI's size; FERRY_MONGODB_SOAK=1 runs 3 partitions
// × 30,000 messages.
func TestMongoDBExactlyOnceUnderSIGKILL(t *testing.T) {
	size := mongoSmall
	if v, _ := strconv.ParseBool(os.Getenv("FERRY_MONGODB_SOAK")); v {
		size = mongoSoak
	}
	mongoExactlyOnceUnderKills(t, size)
}

// TestMongoDBRefusedDocumentToDeadLetter: one message of 200 breaks the collection's
// unique index on payload.k (FerretDB implements no validators; a validator's refusal is
// the same per-document write error): under on_failure = dead_letter it alone goes to the
// dead-letter topic, with ferry-stage consume and MongoDB's E11000, and the 199 others are
// in the collection.
func TestMongoDBRefusedDocumentToDeadLetter(t *testing.T) {
	srv := mongotest.Connect(t)
	db := srv.Database(t)
	srv.CreateCollection(t, db, "c")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := srv.Client.Database(db).Collection("c").Indexes().CreateOne(ctx,
		mongo.IndexModel{Keys: bson.D{{Key: "payload.k", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 1)
	msgs := make([]iggy.Message, 200)
	for i := range msgs {
		k := i
		if i == 42 {
			k = 41
		}
		msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, `{"k":%d,"o":%d}`, k, i)}
	}
	if _, err := c.SendMessages(ctx, iggy.Name("s"), iggy.Name("t"), wire.ToPartition(0), msgs); err != nil {
		t.Fatal(err)
	}
	conns := filepath.Join(dir, "mongo")
	writeFile(t, filepath.Join(conns, "sink.toml"), mongoSink("mongo", srv.URI, db, "c", "dead_letter", ""))
	run := startFerry(t, "run", dir, nil, "run", "--config", remoteConfig(t, dir, addr, conns), "--create-topics", "--progress", "0")
	testkit.WaitFor(t, "the batch written and resolved", func() bool {
		offs, err := offsets(t, addr, "s", "t", "iggy-connect-sink-mongo")
		return err == nil && offs[0].stored == 199
	})
	run.stop(15 * time.Second)
	if n, err := srv.Count(context.Background(), db, "c"); err != nil || n != 199 {
		t.Fatalf("%d documents (%v), want 199", n, err)
	}
	dlq := dumpTopic(t, dir, addr, "dlq", "rejected")
	b, _ := os.ReadFile(filepath.Join(dir, "dump.jsonl"))
	lines := bytes.Split(bytes.TrimSpace(b), []byte{'\n'})
	if len(dlq) != 1 || len(lines) != 1 {
		t.Fatalf("dead-letter topic has %d messages, want 1:\n%s", len(lines), b)
	}
	var rec struct {
		Payload string `json:"payload"`
		Headers []struct{ Key, Kind, Value string }
	}
	if err := json.Unmarshal(lines[0], &rec); err != nil {
		t.Fatal(err)
	}
	hs := map[string]string{}
	for _, h := range rec.Headers {
		hs[h.Key] = h.Value
	}
	if hs["ferry-stage"] != "consume" || !strings.Contains(hs["ferry-error"], "offset 42") || !strings.Contains(hs["ferry-error"], "E11000") {
		t.Fatalf("dead-letter headers = %v; want ferry-stage consume, ferry-error naming offset 42 and E11000", hs)
	}
	if !strings.Contains(string(lines[0]), `\"o\":42`) && !strings.Contains(string(lines[0]), `"o":42`) {
		t.Fatalf("dead-letter message %s, want offset 42's", lines[0])
	}
}

// TestMongoDBCheckConnect: `ferry check --connect` passes a sink that can write, and
// names what is wrong with one whose password is wrong and one whose collection is
// missing with auto_create_collection off — never showing the password.
func TestMongoDBCheckConnect(t *testing.T) {
	srv := mongotest.Connect(t)
	db := srv.Database(t)
	dir := t.TempDir()
	conns := filepath.Join(dir, "mongo")
	wrong := strings.Replace(srv.URI, ":"+srv.Password+"@", ":not-the-password@", 1)
	writeFile(t, filepath.Join(conns, "good.toml"), mongoSink("good", srv.URI, db, "c", "stop", ""))
	writeFile(t, filepath.Join(conns, "creds.toml"), mongoSink("creds", wrong, db, "c", "stop", ""))
	missing := strings.Replace(mongoSink("missing", srv.URI, db, "absent", "stop", ""), "auto_create_collection = true", "auto_create_collection = false", 1)
	writeFile(t, filepath.Join(conns, "missing.toml"), missing)
	cfg := remoteConfig(t, dir, "127.0.0.1:1", conns)
	out, err := exec.Command(ferryBin, "check", "--config", cfg, "--connect").CombinedOutput()
	if err == nil {
		t.Fatalf("check --connect passed:\n%s", out)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "sink" {
			lines[f[1]] = l
		}
	}
	if !strings.HasSuffix(lines["good"], "ok") {
		t.Errorf("good: %q, want ok", lines["good"])
	}
	if !strings.Contains(lines["creds"], `refused the credentials of plugin_config.connection_uri (user "`+srv.User+`")`) {
		t.Errorf("creds: %q", lines["creds"])
	}
	if !strings.Contains(lines["missing"], "collection "+db+".absent at 127.0.0.1:") ||
		!strings.Contains(lines["missing"], "auto_create_collection = false") {
		t.Errorf("missing: %q", lines["missing"])
	}
	if strings.Contains(string(out), srv.Password) || strings.Contains(string(out), "not-the-password") {
		t.Errorf("check showed a password:\n%s", out)
	}
}
