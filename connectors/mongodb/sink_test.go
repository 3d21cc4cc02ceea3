package mongodb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferryio/ferry/internal/mongotest"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// sinkConfig is the plugin_config of a sink writing to db.coll of srv.
func sinkConfig(srv *mongotest.Server, db, coll string, extra map[string]any) map[string]any {
	c := map[string]any{"connection_uri": srv.URI, "database": db, "collection": coll,
		"auto_create_collection": true, "retry_delay": "10ms", "connect_timeout": "5s"}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// records reads db.coll with pymongo as the harness's records: partition and offset from
// iggy_partition_id and iggy_offset (int32 and int64, as upstream stores them), the
// payload from its BSON binary, the _id checked against the message's.
func records(ctx context.Context, srv *mongotest.Server, db, coll string) ([]sdktest.Record, error) {
	docs, err := srv.Read(ctx, db, coll)
	if err != nil {
		return nil, err
	}
	out := make([]sdktest.Record, 0, len(docs))
	for _, d := range docs {
		p, pt, ok1 := d.Int("iggy_partition_id")
		o, ot, ok2 := d.Int("iggy_offset")
		payload, ok3 := d.Binary("payload")
		if !ok1 || !ok2 || !ok3 || pt != "int32" || ot != "int64" {
			return nil, fmt.Errorf("document %s: iggy_partition_id %s (%s), iggy_offset %s (%s), payload %s",
				d.ID(), d.Fields["iggy_partition_id"], pt, d.Fields["iggy_offset"], ot, d.Fields["payload"])
		}
		m := sdktest.Message(uint32(p), uint64(o), nil)
		if want := documentID(sdktest.Topic, uint32(p), &m); d.ID() != want {
			return nil, fmt.Errorf("partition %d offset %d: _id %q, want %q", p, o, d.ID(), want)
		}
		out = append(out, sdktest.Record{Partition: uint32(p), Offset: uint64(o), Payload: payload})
	}
	return out, nil
}

// TestSinkExactlyOnceAtEveryCrash runs the sink against the real server through the
// harness's steps (open, batches, a rebalance, close) with a crash at each: pymongo finds
// every message once, its _id the message's, its payload intact.
func TestSinkExactlyOnceAtEveryCrash(t *testing.T) {
	srv := mongotest.Connect(t)
	db := srv.Database(t)
	cfg := map[string]any{}
	run := 0
	h := sdktest.SinkHarness{
		New:            func() sdk.Sink { return New() },
		Config:         cfg,
		SinkControlled: true,
		Guarantee:      sdktest.ExactlyOnce,
		Messages:       25,
		Batch:          10,
		Reset: func(context.Context) error {
			run++
			for k, v := range sinkConfig(srv, db, fmt.Sprintf("c%d", run), map[string]any{"batch_size": 4}) {
				cfg[k] = v
			}
			return nil
		},
		Read: func(ctx context.Context) ([]sdktest.Record, error) {
			return records(ctx, srv, db, fmt.Sprintf("c%d", run))
		},
	}
	h.CrashAtEveryStep(t)
}

// open opens a sink with plugin_config cfg and a Committer, closed at the end of the test.
func open(t *testing.T, cfg map[string]any, onFailure sdk.OnFailure) (*Sink, *sdktest.Committer) {
	t.Helper()
	c := sdktest.NewCommitter()
	env := sdktest.SinkEnv(t, cfg, c)
	env.OnFailure = onFailure
	s := New()
	if err := s.Open(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, c
}

// TestSinkDocumentShape: each payload_format stores upstream's document — _id, the
// metadata fields in upstream's order and BSON types, the payload as binary, an embedded
// document (keys in the payload's order) or a string — as pymongo reads it.
func TestSinkDocumentShape(t *testing.T) {
	srv := mongotest.Connect(t)
	db := srv.Database(t)
	payload := []byte(`{"z":1,"a":[true,null,2.5,"x"],"big":9007199254740993,"nested":{"k":"v"}}`)
	for _, format := range []string{"binary", "json", "string"} {
		t.Run(format, func(t *testing.T) {
			s, c := open(t, sinkConfig(srv, db, format, map[string]any{"payload_format": format}), sdk.FailureStop)
			p := sdktest.Part(2)
			m := sdktest.Message(2, 7, func(uint32, uint64) []byte { return payload })
			m.Checksum = 1<<63 + 5 // beyond int64: stored as a string, as upstream does
			if err := sdktest.Consume(context.Background(), s, c, sdktest.Topic, p, []sdk.ConsumedMessage{m}); err != nil {
				t.Fatal(err)
			}
			if off, _ := c.Committed(p); off != 7 {
				t.Fatalf("committed %d, want 7", off)
			}
			docs, err := srv.Read(context.Background(), db, format)
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) != 1 {
				t.Fatalf("%d documents, want 1", len(docs))
			}
			d := docs[0]
			wantKeys := []string{"_id", "iggy_offset", "iggy_timestamp", "iggy_stream", "iggy_topic", "iggy_partition_id",
				"iggy_checksum", "iggy_origin_timestamp", "payload"}
			if !slices.Equal(d.Keys, wantKeys) {
				t.Fatalf("fields %v, want %v", d.Keys, wantKeys)
			}
			want := map[string]string{
				"_id":                   fmt.Sprintf(`"stream:topic:2:%d"`, uint64(2)<<40|8),
				"iggy_offset":           `{"$numberLong":"7"}`,
				"iggy_timestamp":        `{"$date":{"$numberLong":"1710597600000"}}`,
				"iggy_stream":           `"stream"`,
				"iggy_topic":            `"topic"`,
				"iggy_partition_id":     `{"$numberInt":"2"}`,
				"iggy_checksum":         `"9223372036854775813"`,
				"iggy_origin_timestamp": `{"$date":{"$numberLong":"1710597600000"}}`,
			}
			switch format {
			case "binary":
				want["payload"] = fmt.Sprintf(`{"$binary":{"base64":"%s","subType":"00"}}`, b64(payload))
			case "json":
				want["payload"] = `{"z":{"$numberLong":"1"},"a":[true,null,{"$numberDouble":"2.5"},"x"],` +
					`"big":{"$numberLong":"9007199254740993"},"nested":{"k":"v"}}`
			case "string":
				s, _ := json.Marshal(string(payload))
				want["payload"] = string(s)
			}
			for k, v := range want {
				if got := compact(t, d.Fields[k]); got != v {
					t.Errorf("%s = %s, want %s", k, got, v)
				}
			}
		})
	}
}

func b64(b []byte) string {
	s, _ := json.Marshal(b)
	return strings.Trim(string(s), `"`)
}

func compact(t *testing.T, raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return b.String()
}

// TestSinkMetadataOff: include_metadata, include_checksum and include_origin_timestamp
// off leave _id and payload.
func TestSinkMetadataOff(t *testing.T) {
	srv := mongotest.Connect(t)
	db := srv.Database(t)
	s, c := open(t, sinkConfig(srv, db, "c", map[string]any{"include_metadata": false, "include_checksum": false,
		"include_origin_timestamp": false}), sdk.FailureStop)
	if err := sdktest.Consume(context.Background(), s, c, sdktest.Topic, sdktest.Part(0), sdktest.Messages(0, 0, 2, nil)); err != nil {
		t.Fatal(err)
	}
	docs, err := srv.Read(context.Background(), db, "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || !slices.Equal(docs[0].Keys, []string{"_id", "payload"}) {
		t.Fatalf("%d documents, fields %v; want 2 of _id and payload", len(docs), docs[0].Keys)
	}
}

// TestSinkReplayCountsAsWritten: a second instance given the same batch (Iggy's stored
// offset lagging the collection) finds every _id there: no rejection, the batch
// committed, the collection unchanged.
func TestSinkReplayCountsAsWritten(t *testing.T) {
	srv := mongotest.Connect(t)
	db := srv.Database(t)
	cfg := sinkConfig(srv, db, "c", map[string]any{"batch_size": 7})
	p := sdktest.Part(1)
	msgs := sdktest.Messages(1, 0, 20, nil)
	s1, c1 := open(t, cfg, sdk.FailureStop)
	if err := sdktest.Consume(context.Background(), s1, c1, sdktest.Topic, p, msgs[:12]); err != nil {
		t.Fatal(err)
	}
	s2, c2 := open(t, cfg, sdk.FailureStop)
	if err := sdktest.Consume(context.Background(), s2, c2, sdktest.Topic, p, msgs); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if off, _ := c2.Committed(p); off != 19 {
		t.Fatalf("committed %d, want 19", off)
	}
	if got := s2.dups.Load(); got != 12 {
		t.Fatalf("%d documents found written already, want 12", got)
	}
	recs, err := records(context.Background(), srv, db, "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 20 {
		t.Fatalf("%d documents, want 20", len(recs))
	}
}

// TestSinkZeroMessageIDs: messages a producer left with id 0 each get their own document,
// "stream:topic:partition:offset-N" (upstream's id would give them all one _id, and all
// but the first would be taken as written).
func TestSinkZeroMessageIDs(t *testing.T) {
	srv := mongotest.Connect(t)
	db := srv.Database(t)
	s, c := open(t, sinkConfig(srv, db, "c", nil), sdk.FailureStop)
	msgs := sdktest.Messages(0, 0, 5, nil)
	for i := range msgs {
		msgs[i].ID = sdk.MessageID{}
	}
	if err := sdktest.Consume(context.Background(), s, c, sdktest.Topic, sdktest.Part(0), msgs); err != nil {
		t.Fatal(err)
	}
	docs, err := srv.Read(context.Background(), db, "c")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range docs {
		ids = append(ids, d.ID())
	}
	want := []string{"stream:topic:0:offset-0", "stream:topic:0:offset-1", "stream:topic:0:offset-2",
		"stream:topic:0:offset-3", "stream:topic:0:offset-4"}
	if !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
}

// uniqueIndexCollection creates db.coll with a unique index on payload.k: the per-document
// refusal FerretDB can give (it implements no validators).
func uniqueIndexCollection(t *testing.T, srv *mongotest.Server, db, coll string) {
	t.Helper()
	srv.CreateCollection(t, db, coll)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := srv.Client.Database(db).Collection(coll).Indexes().CreateOne(ctx,
		mongo.IndexModel{Keys: bson.D{{Key: "payload.k", Value: 1}}, Options: options.Index().SetUnique(true)})
	if err != nil {
		t.Fatal(err)
	}
}

// keyed is a JSON payload whose k is the offset, but 3 for offset 6: offset 6 breaks the
// unique index on payload.k.
func keyed(_ uint32, o uint64) []byte {
	k := o
	if o == 6 {
		k = 3
	}
	return fmt.Appendf(nil, `{"k":%d,"o":%d}`, k, o)
}

// TestSinkRefusedDocumentAlone: a document the collection refuses (a user's unique index)
// is returned alone as rejected, everything else of the batch is written, and only the
// offsets below it are committed (the runtime resolves the rest once on_failure handled
// it); under stop, nothing at or past it is committed either.
func TestSinkRefusedDocumentAlone(t *testing.T) {
	srv := mongotest.Connect(t)
	for _, of := range []sdk.OnFailure{sdk.FailureDeadLetter, sdk.FailureStop} {
		t.Run(string(of), func(t *testing.T) {
			db := srv.Database(t)
			uniqueIndexCollection(t, srv, db, "c")
			s, c := open(t, sinkConfig(srv, db, "c", map[string]any{"payload_format": "json", "batch_size": 4,
				"auto_create_collection": false}), of)
			p := sdktest.Part(0)
			err := sdktest.Consume(context.Background(), s, c, sdktest.Topic, p, sdktest.Messages(0, 0, 10, keyed))
			if got := sdktest.Rejected(err); !slices.Equal(got, []uint64{6}) {
				t.Fatalf("rejected %v (%v), want [6]", got, err)
			}
			if !strings.Contains(err.Error(), "partition 0 offset 6") || !strings.Contains(err.Error(), "E11000") {
				t.Fatalf("rejection %q names neither the message nor MongoDB's refusal", err)
			}
			if off, _ := c.Committed(p); off != 5 {
				t.Fatalf("committed %d, want 5 (below the rejected message)", off)
			}
			n, err := srv.Count(context.Background(), db, "c")
			if err != nil {
				t.Fatal(err)
			}
			want := int64(9)
			if of == sdk.FailureStop {
				want = 7 // the write ends with the chunk of the rejected message (offsets 4..7, 6 refused)
			}
			if n != want {
				t.Fatalf("%d documents, want %d", n, want)
			}
		})
	}
}

// TestSinkUnstorablePayloadAlone: a payload payload_format cannot store (not JSON) is
// rejected alone before anything is sent; the rest is written.
func TestSinkUnstorablePayloadAlone(t *testing.T) {
	srv := mongotest.Connect(t)
	db := srv.Database(t)
	s, c := open(t, sinkConfig(srv, db, "c", map[string]any{"payload_format": "json"}), sdk.FailureSkip)
	bad := func(p uint32, o uint64) []byte {
		if o == 2 {
			return []byte("not json")
		}
		return sdktest.JSONPayload(p, o)
	}
	err := sdktest.Consume(context.Background(), s, c, sdktest.Topic, sdktest.Part(0), sdktest.Messages(0, 0, 5, bad))
	if got := sdktest.Rejected(err); !slices.Equal(got, []uint64{2}) || !strings.Contains(err.Error(), `payload_format = "json"`) {
		t.Fatalf("rejected %v: %v; want [2], naming payload_format", got, err)
	}
	if n, _ := srv.Count(context.Background(), db, "c"); n != 4 {
		t.Fatalf("%d documents, want 4", n)
	}
}

// openErr opens a sink with cfg and returns Open's error.
func openErr(t *testing.T, cfg map[string]any) error {
	t.Helper()
	s := New()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := s.Open(ctx, sdktest.SinkEnv(t, cfg, sdktest.NewCommitter()))
	if err == nil {
		_ = s.Close(ctx)
	}
	return err
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestSinkOpenErrors: wrong credentials (permanent, naming the user and the host, never
// the password), an unreachable server (retried by the runtime, naming the host), a
// missing collection with auto_create_collection off (permanent, naming it and the key),
// w=0 (refused): each a clear error at Open, and the same from Preflight.
func TestSinkOpenErrors(t *testing.T) {
	srv := mongotest.Connect(t)
	db := srv.Database(t)
	wrong := strings.Replace(srv.URI, ":"+srv.Password+"@", ":not-the-password@", 1)
	unreachable := "mongodb://" + closedPort(t) + "/"
	cases := []struct {
		name      string
		cfg       map[string]any
		permanent bool
		want      []string
	}{
		{"wrong credentials", sinkConfig(srv, db, "c", map[string]any{"connection_uri": wrong}), true,
			[]string{"refused the credentials of plugin_config.connection_uri", `(user "` + srv.User + `")`, "127.0.0.1:"}},
		{"unreachable", sinkConfig(srv, db, "c", map[string]any{"connection_uri": unreachable, "connect_timeout": "500ms"}), false,
			[]string{"cannot reach MongoDB at " + strings.TrimPrefix(strings.TrimSuffix(unreachable, "/"), "mongodb://"), "plugin_config.connection_uri"}},
		{"missing collection", sinkConfig(srv, db, "absent", map[string]any{"auto_create_collection": false}), true,
			[]string{"collection " + db + ".absent at 127.0.0.1:", "does not exist and plugin_config.auto_create_collection = false"}},
		{"unacknowledged", sinkConfig(srv, db, "c", map[string]any{"connection_uri": srv.URI + "&w=0"}), true,
			[]string{"w=0 asks for unacknowledged writes"}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			err := openErr(t, tc.cfg)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if got := errors.Is(err, sdk.ErrPermanent); got != tc.permanent {
				t.Errorf("permanent = %v, want %v: %v", got, tc.permanent, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			perrs := New().Preflight(ctx, sdktest.Config(t, tc.cfg))
			if len(perrs) != 1 {
				t.Fatalf("preflight: %v, want one error", perrs)
			}
			for _, e := range []error{err, perrs[0]} {
				for _, w := range tc.want {
					if !strings.Contains(e.Error(), w) {
						t.Errorf("error %q lacks %q", e, w)
					}
				}
				if strings.Contains(e.Error(), srv.Password) || strings.Contains(e.Error(), "not-the-password") {
					t.Errorf("error %q shows the password", e)
				}
			}
		})
	}
	// The collection is there (or may be created): the preflight passes, creating nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if errs := New().Preflight(ctx, sdktest.Config(t, sinkConfig(srv, db, "later", nil))); len(errs) != 0 {
		t.Fatalf("preflight: %v", errs)
	}
	names, err := srv.Client.Database(db).ListCollectionNames(ctx, bson.D{})
	if err != nil || slices.Contains(names, "later") {
		t.Fatalf("collections %v (%v): the preflight created one", names, err)
	}
}

// TestSinkServerDown: with the server gone, Consume fails as not connected (waited out
// by the runtime, never counted) and nothing is committed; once it is back, the batch
// goes through. The server is restarted by scripts/ferretdb.sh (SIGKILL).
func TestSinkServerDown(t *testing.T) {
	srv := mongotest.Connect(t)
	db := srv.Database(t)
	s, c := open(t, sinkConfig(srv, db, "c", map[string]any{"max_retries": 1, "write_timeout": "2s", "connect_timeout": "1s"}), sdk.FailureStop)
	p := sdktest.Part(0)
	if err := sdktest.Consume(context.Background(), s, c, sdktest.Topic, p, sdktest.Messages(0, 0, 5, nil)); err != nil {
		t.Fatal(err)
	}
	srv.Restart(t)
	// The restart dropped the pool's connections: the next batch reconnects (retried by
	// the driver or by the runtime, as a lost connection).
	msgs := sdktest.Messages(0, 5, 5, nil)
	var err error
	for range 5 {
		if err = sdktest.Consume(context.Background(), s, c, sdktest.Topic, p, msgs); err == nil {
			break
		}
		if !errors.Is(err, sdk.ErrNotConnected) && !strings.Contains(err.Error(), "insert into") {
			t.Fatalf("after a restart: %v", err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if off, _ := c.Committed(p); off != 9 {
		t.Fatalf("committed %d, want 9", off)
	}
}
