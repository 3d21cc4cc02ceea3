package s3

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/goleak"

	"github.com/ferryio/ferry/connectors/internal/parquetrows"
	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

var topic = sdk.TopicMetadata{Stream: "s", Topic: "t", StreamID: 1, TopicID: 2}

func part(id uint32) sdk.Partition { return sdk.Partition{StreamID: 1, TopicID: 2, PartitionID: id} }

const ts0 = 1_710_597_600_000_000 // 2024-03-16T14:00:00Z

// msgs returns the kit's messages n of partition p from offset first: payload
// {"p":P,"o":O}, header "offset", timestamps ts0 + offset.
func msgs(p uint32, first, n uint64) []sdk.ConsumedMessage { return sdktest.Messages(p, first, n, nil) }

func cfgOf(srv *s3test.Server, bucket, extra string) string {
	return fmt.Sprintf(`{"bucket":%q,"region":%q,"endpoint":%q,"access_key_id":%q,"secret_access_key":%q,"prefix":"pre"%s}`,
		bucket, srv.Region, srv.Endpoint, srv.AccessKey, srv.SecretKey, extra)
}

// tsink is a sink under test and the Committer it was opened with, which judges its
// commits as the runtime does.
type tsink struct {
	*Sink
	c *sdktest.Committer
}

// openWith opens s with env, whose Committer is c, and closes it when the test ends.
func openWith(t testing.TB, s *Sink, env sdk.SinkEnv, c *sdktest.Committer) *tsink {
	t.Helper()
	if err := s.Open(context.Background(), env); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return &tsink{s, c}
}

// open opens a sink with the plugin_config cfg and c as its Committer.
func open(t *testing.T, cfg string, c *sdktest.Committer) *tsink {
	t.Helper()
	return openWith(t, New(), sdktest.SinkEnv(t, cfg, c), c)
}

// assign assigns partitions ids as the runtime does: each resumes where the sink seeks,
// else at 0 (a group with no stored offset).
func assign(t *testing.T, s *tsink, ids ...uint32) map[sdk.Partition]uint64 {
	t.Helper()
	var ps []sdk.Partition
	for _, id := range ids {
		ps = append(ps, part(id))
	}
	got, err := s.Assigned(context.Background(), topic, ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		s.c.Assign(p, got[p])
	}
	return got
}

// deliver hands a batch of partition p to the sink as the runtime does.
func (s *tsink) deliver(p uint32, m []sdk.ConsumedMessage) error {
	return sdktest.Consume(context.Background(), s.Sink, s.c, topic, part(p), m)
}

func consume(t *testing.T, s *tsink, p uint32, m []sdk.ConsumedMessage) {
	t.Helper()
	if err := s.deliver(p, m); err != nil {
		t.Fatalf("consume: %v", err)
	}
}

// TestParquetReadByPyarrow: 3 partitions × 250 messages, 100 per object, read back by
// pyarrow: exactly the (partition, offset) pairs, payloads, ids, headers, zstd, and the
// commits at each object's last offset.
func TestParquetReadByPyarrow(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	c := sdktest.NewCommitter()
	s := open(t, cfgOf(srv, bucket, `,"output_format":"parquet","file_rotation":"messages","max_messages_per_file":100,"row_group_size":40`), c)
	if got := assign(t, s, 0, 1, 2); len(got) != 0 {
		t.Fatalf("empty bucket: seek %v, want none", got)
	}
	for p := uint32(0); p < 3; p++ {
		for first := uint64(0); first < 250; first += 50 {
			consume(t, s, p, msgs(p, first, 50))
		}
	}
	c.WaitCommitted(t, part(1), 199) // two full objects; 200-249 are buffered
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs := srv.ReadParquet(t, bucket)
	if len(objs) != 9 {
		t.Fatalf("%d objects, want 9", len(objs))
	}
	want := "pre/s/t/2024-03-16/14/00001-00000000000000000200-00000000000000000249.parquet"
	if objs[5].Key != want {
		t.Fatalf("object 5 is %s, want %s", objs[5].Key, want)
	}
	seen := map[[2]uint64]bool{}
	for _, o := range objs {
		if o.Compression != "ZSTD" {
			t.Fatalf("%s: compression %q, want ZSTD", o.Key, o.Compression)
		}
		if len(o.Rows) > 40 && o.RowGroups < 2 {
			t.Fatalf("%s: %d rows in %d row groups, want groups of 40", o.Key, len(o.Rows), o.RowGroups)
		}
		for _, r := range o.Rows {
			k := [2]uint64{uint64(r.Partition), r.Offset}
			if seen[k] {
				t.Fatalf("(%d, %d) twice", r.Partition, r.Offset)
			}
			seen[k] = true
			wantPayload := fmt.Sprintf(`{"p":%d,"o":%d}`, r.Partition, r.Offset)
			wantID := sdk.MessageIDFromUint64(uint64(r.Partition)<<40 | r.Offset + 1).String()
			if r.Payload != wantPayload || r.ID != wantID || r.Stream != "s" || r.Topic != "t" ||
				r.TimestampUS != int64(ts0+r.Offset) || r.Headers["offset"] != fmt.Sprint(r.Offset) {
				t.Fatalf("%s: row %+v; want payload %s, id %s, timestamp %d, header offset=%d", o.Key, r, wantPayload, wantID, ts0+r.Offset, r.Offset)
			}
		}
	}
	if len(seen) != 750 {
		t.Fatalf("%d distinct (partition, offset), want 750", len(seen))
	}
	for p := uint32(0); p < 3; p++ {
		if last, _ := c.Committed(part(p)); last != 249 {
			t.Fatalf("partition %d committed %d, want 249", p, last)
		}
	}
}

// TestResumeSeeksPastTheBucket: a second sink on the same bucket (a restart) is told by
// the bucket where each partition resumes, whatever the objects' dates; a redelivered
// batch is skipped; an upload of a range already there is refused by the conditional PUT
// and counted as written (committed, no second object).
func TestResumeSeeksPastTheBucket(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	cfg := cfgOf(srv, bucket, `,"file_rotation":"messages","max_messages_per_file":10`)
	c1 := sdktest.NewCommitter()
	s1 := open(t, cfg, c1)
	assign(t, s1, 0, 1)
	consume(t, s1, 0, msgs(0, 0, 25))
	late := msgs(1, 0, 10)
	for i := range late { // partition 1's objects an hour apart: another directory
		late[i].Timestamp += uint64(time.Hour / time.Microsecond)
	}
	consume(t, s1, 1, late)
	consume(t, s1, 1, msgs(1, 10, 10))
	consume(t, s1, 0, msgs(0, 20, 5)) // redelivered: skipped
	// "Crash" once the uploads under way landed: s1's buffer of partition 0 (offsets
	// 20-24) is never uploaded.
	for _, ps := range s1.snapshot() {
		ps.mu.Lock()
		if f := ps.inflight; f != nil {
			<-f.done
		}
		ps.mu.Unlock()
	}
	s1.cancel()
	<-s1.done
	s1.st.close()
	s1.closed.Store(true)

	c2 := sdktest.NewCommitter()
	s2 := open(t, cfg, c2)
	got := assign(t, s2, 0, 1, 2)
	want := map[sdk.Partition]uint64{part(0): 20, part(1): 20}
	if len(got) != 2 || got[part(0)] != 20 || got[part(1)] != 20 {
		t.Fatalf("seek %v, want %v", got, want)
	}
	// The first owner's upload of 10-19 arrives again (a retry that landed before): refused
	// by If-None-Match, counted as written.
	consume(t, s2, 0, msgs(0, 0, 20)) // below the seek: skipped
	// As if the sink had lost its positions and the runtime resumed at 10.
	s2.pos.Forget(part(0))
	c2.Assign(part(0), 10)
	consume(t, s2, 0, msgs(0, 10, 10))
	c2.WaitCommitted(t, part(0), 19) // the existing object counts as written
	consume(t, s2, 0, msgs(0, 20, 10))
	c2.WaitCommitted(t, part(0), 29)
	keys := srv.Keys(t, bucket)
	wantKeys := []string{
		"pre/s/t/2024-03-16/14/00000-00000000000000000000-00000000000000000009.jsonl",
		"pre/s/t/2024-03-16/14/00000-00000000000000000010-00000000000000000019.jsonl",
		"pre/s/t/2024-03-16/14/00000-00000000000000000020-00000000000000000029.jsonl",
		"pre/s/t/2024-03-16/14/00001-00000000000000000010-00000000000000000019.jsonl",
		"pre/s/t/2024-03-16/15/00001-00000000000000000000-00000000000000000009.jsonl",
	}
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("keys\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(wantKeys, "\n"))
	}
	body := string(srv.Get(t, bucket, wantKeys[2]))
	if n := strings.Count(body, "\n"); n != 10 || !strings.HasPrefix(body, `{"offset":20,"timestamp":"2024-03-16T14:00:00Z","stream":"s","topic":"t","partition_id":0,"payload":{"p":0,"o":20}}`+"\n") {
		t.Fatalf("object 20-29: %d lines:\n%s", n, body)
	}
}

// TestJSONShapes: json_array and raw objects byte for byte, headers included.
func TestJSONShapes(t *testing.T) {
	srv := s3test.Connect(t)
	for format, want := range map[string]string{
		"json_array": `[{"offset":0,"timestamp":"2024-03-16T14:00:00Z","stream":"s","topic":"t","partition_id":3,"headers":{"offset":0},"payload":{"p":3,"o":0}},` +
			`{"offset":1,"timestamp":"2024-03-16T14:00:00Z","stream":"s","topic":"t","partition_id":3,"headers":{"offset":1},"payload":{"p":3,"o":1}}]`,
		"raw": `{"p":3,"o":0}{"p":3,"o":1}`,
	} {
		bucket := srv.Bucket(t)
		s := open(t, cfgOf(srv, bucket, fmt.Sprintf(`,"output_format":%q,"include_headers":true,"path_template":"{topic}"`, format)), sdktest.NewCommitter())
		assign(t, s, 3)
		consume(t, s, 3, msgs(3, 0, 2))
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		keys := srv.Keys(t, bucket)
		if len(keys) != 1 {
			t.Fatalf("%s: keys %v", format, keys)
		}
		if got := string(srv.Get(t, bucket, keys[0])); got != want {
			t.Fatalf("%s: %s\nwant %s", format, got, want)
		}
	}
}

// TestIdleAndMemoryFlushes: flush_interval uploads an idle partition; max_buffered_bytes
// uploads the largest buffer early.
func TestIdleAndMemoryFlushes(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	c := sdktest.NewCommitter()
	s := open(t, cfgOf(srv, bucket, `,"flush_interval":"50ms","max_buffered_bytes":"1000"`), c)
	assign(t, s, 0, 1)
	consume(t, s, 0, msgs(0, 0, 3))
	testkit.WaitFor(t, "the idle partition flushed up to offset 2", func() bool { last, ok := c.Committed(part(0)); return ok && last == 2 })
	// About 150 bytes a message: 10 messages pass 1000 bytes; the largest (partition 1) goes.
	if err := s.deliver(1, msgs(1, 0, 10)); err != nil {
		t.Fatal(err)
	}
	c.WaitCommitted(t, part(1), 9) // max_buffered_bytes
	if n := s.buffered.Load(); n != 0 {
		t.Fatalf("%d bytes still buffered", n)
	}
}

// TestRevokedPartitionNotUploaded: a partition the runtime no longer assigns (its commit
// says unknown partition) is dropped, not uploaded: the new owner writes it.
func TestRevokedPartitionNotUploaded(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	c := sdktest.NewCommitter()
	s := open(t, cfgOf(srv, bucket, ""), c)
	assign(t, s, 0)
	consume(t, s, 0, msgs(0, 5, 3))
	c.Revoke(part(0))
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if keys := srv.Keys(t, bucket); len(keys) != 0 {
		t.Fatalf("keys %v, want none", keys)
	}
}

func TestMissingBucketNamed(t *testing.T) {
	srv := s3test.Connect(t)
	err := New().Open(context.Background(), sdk.SinkEnv{Config: []byte(cfgOf(srv, "no-such-bucket-ferry", "")), Committer: sdktest.NewCommitter()})
	if err == nil || err.Error() != `s3 sink: bucket "no-such-bucket-ferry" does not exist` {
		t.Fatalf("open: %v", err)
	}
	err = New().Open(context.Background(), sdk.SinkEnv{Config: []byte(strings.Replace(cfgOf(srv, srv.Bucket(t), ""), srv.SecretKey, "wrong", 1)), Committer: sdktest.NewCommitter()})
	if err == nil || !strings.HasPrefix(err.Error(), `s3 sink: access to bucket "testmissingbucketnamed-`) {
		t.Fatalf("open with a wrong secret: %v", err)
	}
	if strings.Contains(err.Error(), srv.SecretKey) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("the error shows a secret: %v", err)
	}
}

func TestOtherCommitModesRefused(t *testing.T) {
	err := New().Open(context.Background(), sdk.SinkEnv{Config: []byte(`{"bucket":"b","region":"r"}`)})
	if err == nil || !strings.Contains(err.Error(), `offset_commit = "sink_controlled" is required`) {
		t.Fatalf("open: %v", err)
	}
}

// TestConditionalPutRefusesSecondWrite: the server honours If-None-Match: * (the second
// PUT of a key is refused, the first object stays), and the refusal counts as written
// (errExists) only when the object there has the upload's identity in its metadata: the
// same range of the same partition of the same stream's topic. An object of another range,
// partition, topic or stream, or one without Ferry's metadata, is someone else's: an error
// naming both, never written.
func TestConditionalPutRefusesSecondWrite(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	s := open(t, cfgOf(srv, bucket, ""), sdktest.NewCommitter())
	ctx := context.Background()
	id := identity{stream: "shop", topic: "orders", partition: 0, first: 0, last: 99}
	if err := s.st.put(ctx, "k", []byte("first"), "text/plain", id); err != nil {
		t.Fatal(err)
	}
	if err := s.st.put(ctx, "k", []byte("second"), "text/plain", id); !errors.Is(err, errExists) {
		t.Fatalf("second put: %v, want errExists", err)
	}
	for _, other := range []identity{
		{stream: "shop", topic: "refunds", partition: 0, first: 0, last: 99},
		{stream: "shôp", topic: "orders", partition: 0, first: 0, last: 99},
		{stream: "shop", topic: "orders", partition: 1, first: 0, last: 99},
		{stream: "shop", topic: "orders", partition: 0, first: 0, last: 98},
	} {
		err := s.st.put(ctx, "k", []byte("other"), "text/plain", other)
		want := fmt.Sprintf(`upload of %s to s3://%s/k refused: the key already holds the object of stream "shop" topic "orders" partition 0 offsets 0-99; not counted as written`, other, bucket)
		if !errors.Is(err, errForeign) || errors.Is(err, errExists) || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("put of %s: %v\nwant errForeign: %s…", other, err, want)
		}
	}
	if got := string(srv.Get(t, bucket, "k")); got != "first" {
		t.Fatalf("object holds %q, want first", got)
	}
	// An object without Ferry's metadata (another tool's) is not this range either.
	if _, err := srv.Client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: aws.String("bare"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	err := s.st.put(ctx, "bare", []byte("mine"), "text/plain", id)
	if !errors.Is(err, errForeign) || !strings.Contains(err.Error(), "the key already holds an object without Ferry's identity metadata") {
		t.Fatalf("put over an object without metadata: %v, want errForeign", err)
	}
	// Names that metadata must encode (not ASCII, spaces, '%') come back as they were.
	odd := identity{stream: "é ü%/x", topic: "t\u00a0", partition: 7, first: 5, last: 9}
	if err := s.st.put(ctx, "odd", []byte("x"), "text/plain", odd); err != nil {
		t.Fatal(err)
	}
	if err := s.st.put(ctx, "odd", []byte("x"), "text/plain", odd); !errors.Is(err, errExists) {
		t.Fatalf("second put of odd names: %v, want errExists", err)
	}
}

// TestFailedUploadKeepsTheBuffer: an upload that fails in the background (the bucket is
// gone) fails the partition's next Consume and commits nothing; the runtime's retry of
// the batch uploads it once the bucket is back, as one valid JSON array.
func TestFailedUploadKeepsTheBuffer(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	c := sdktest.NewCommitter()
	s := open(t, cfgOf(srv, bucket, `,"output_format":"json_array","file_rotation":"messages","max_messages_per_file":3,"max_attempts":1,"include_metadata":false`), c)
	assign(t, s, 0)
	ctx := context.Background()
	if _, err := srv.Client.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
	batch := msgs(0, 0, 3)
	consume(t, s, 0, batch) // full: its upload starts in the background
	s.mu.Lock()
	f := s.parts[part(0)].inflight
	s.mu.Unlock()
	<-f.done
	err := s.deliver(0, batch)
	want := fmt.Sprintf(`s3 sink: upload failed after 1 attempts: put s3://%s/pre/s/t/2024-03-16/14/00000-00000000000000000000-00000000000000000002.json: bucket %q does not exist`, bucket, bucket)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("consume: %v\nwant %s…", err, want)
	}
	if _, ok := c.Committed(part(0)); ok {
		t.Fatal("committed after a failed upload")
	}
	if _, err := srv.Client.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
	consume(t, s, 0, batch) // the runtime's retry
	if last, ok := c.Committed(part(0)); !ok || last != 2 {
		t.Fatalf("committed %d, %v; want 2", last, ok)
	}
	keys := srv.Keys(t, bucket)
	if len(keys) != 1 {
		t.Fatalf("keys %v", keys)
	}
	if got := string(srv.Get(t, bucket, keys[0])); got != `[{"payload":{"p":0,"o":0}},{"payload":{"p":0,"o":1}},{"payload":{"p":0,"o":2}}]` {
		t.Fatalf("object %s", got)
	}
}

// TestParquetTypedColumns: [[plugin_config.columns]] fill typed columns from the JSON
// payload (a missing field is null); a message whose field has the wrong type is rejected
// alone (sdk.RejectedMessages, on_failure skip) and the others are written.
func TestParquetTypedColumns(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	c := sdktest.NewCommitter()
	cols := `,"columns":[{"name":"user","type":"string","path":"user.name"},{"name":"n","type":"int64","path":"n"},` +
		`{"name":"score","type":"float64","path":"score"},{"name":"ok","type":"bool","path":"ok"},{"name":"u","type":"json","path":"user"}]`
	env := sdktest.SinkEnv(t, cfgOf(srv, bucket, `,"output_format":"parquet"`+cols), c)
	env.OnFailure = sdk.FailureSkip
	s := openWith(t, New(), env, c)
	assign(t, s, 0)
	batch := msgs(0, 0, 3)
	batch[0].Payload = []byte(`{"user":{"name":"ann","id":7},"n":5,"score":1.5,"ok":true}`)
	batch[1].Payload = []byte(`{"n":"five"}`)
	batch[2].Payload = []byte(`{"n":-2}`)
	err := s.deliver(0, batch)
	var rej *sdk.RejectedMessages
	if !errors.As(err, &rej) || !slices.Equal(rej.Offsets, []uint64{1}) || !strings.Contains(err.Error(), `column "n" (path n): want an integer, got the string "five"`) {
		t.Fatalf("consume: %v; want offset 1 rejected for column n", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs := srv.ReadParquet(t, bucket)
	if len(objs) != 1 || len(objs[0].Rows) != 2 {
		t.Fatalf("objects %+v; want one with 2 rows", objs)
	}
	r0, r2 := objs[0].Rows[0].Columns, objs[0].Rows[1].Columns
	if fmt.Sprint(r0) != `map[n:5 ok:true score:1.5 u:{"id":7,"name":"ann"} user:ann]` ||
		fmt.Sprint(r2) != `map[n:-2 ok:<nil> score:<nil> u:<nil> user:<nil>]` || objs[0].Rows[1].Offset != 2 {
		t.Fatalf("typed columns %v and %v (offset %d)", r0, r2, objs[0].Rows[1].Offset)
	}
	for _, want := range []string{"n: int64", "score: double", "ok: bool", "user: string", "u: string"} {
		if !strings.Contains(objs[0].Schema, want) {
			t.Fatalf("schema %s lacks %q", objs[0].Schema, want)
		}
	}
}

// TestParquetCodecsReadByPyarrow: every codec and zstd level writes objects pyarrow reads
// back exactly (each codec its own partition of one bucket), labelled with that codec; gzip
// compresses (its zero level used to store the pages as they were) and zstd's fastest
// level keeps these rows at most a tenth larger than its default.
func TestParquetCodecsReadByPyarrow(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	cases := []struct{ extra, want string }{
		{`,"compression":"zstd","compression_level":"fastest"`, "ZSTD"},
		{`,"compression":"zstd","compression_level":"default"`, "ZSTD"},
		{`,"compression":"zstd","compression_level":"better"`, "ZSTD"},
		{``, "ZSTD"}, // the default level
		{`,"compression":"snappy"`, "SNAPPY"},
		{`,"compression":"gzip"`, "GZIP"},
		{`,"compression":"none"`, "UNCOMPRESSED"},
	}
	for i, c := range cases {
		s := open(t, cfgOf(srv, bucket, `,"output_format":"parquet","file_rotation":"messages","max_messages_per_file":500`+c.extra), sdktest.NewCommitter())
		assign(t, s, uint32(i))
		consume(t, s, uint32(i), msgs(uint32(i), 0, 500))
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	objs := srv.ReadParquet(t, bucket)
	if len(objs) != len(cases) {
		t.Fatalf("%d objects, want %d", len(objs), len(cases))
	}
	size := map[uint32]int{}
	for _, o := range objs {
		if len(o.Rows) != 500 {
			t.Fatalf("%s: %d rows, want 500", o.Key, len(o.Rows))
		}
		p := o.Rows[0].Partition
		if o.Compression != cases[p].want {
			t.Fatalf("%s (%s): compression %q, want %s", o.Key, cases[p].extra, o.Compression, cases[p].want)
		}
		for i, r := range o.Rows {
			if r.Partition != p || r.Offset != uint64(i) || r.Payload != fmt.Sprintf(`{"p":%d,"o":%d}`, p, i) {
				t.Fatalf("%s: row %d is %+v", o.Key, i, r)
			}
		}
		size[p] = len(srv.Get(t, bucket, o.Key))
	}
	if size[5] >= size[6] {
		t.Fatalf("gzip object %d bytes, uncompressed %d: gzip does not compress", size[5], size[6])
	}
	if size[0] > size[1]+size[1]/10 {
		t.Fatalf("zstd fastest %d bytes, default level %d: want fastest within a tenth of default", size[0], size[1])
	}
	if cfg, err := Config.Parse([]byte(`{"bucket":"b","region":"r"}`)); err != nil || cfg.Level != parquetrows.ZstdFastest || parquetrows.Codec(cfg.Compression, cfg.Level) != parquetrows.Codec(parquetrows.Zstd, parquetrows.ZstdFastest) {
		t.Fatalf("unset compression_level: level %q (%v), want fastest", cfg.Level, err)
	}
}

// TestParquetEncodeFailureRetried: an object whose encoding in the background fails (and
// fails again when the partition's next call tries it) fails that call and is not
// committed; nothing after it is uploaded meanwhile; the batch retried encodes and uploads
// it, and every message lands once.
func TestParquetEncodeFailureRetried(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	c := sdktest.NewCommitter()
	sink := New()
	var fails atomic.Int32
	fails.Store(2) // the background attempt and the next call's
	sink.encodeFault = func(key string) error {
		if fails.Add(-1) >= 0 {
			return fmt.Errorf("injected encoding failure of %s", key)
		}
		return nil
	}
	s := openWith(t, sink, sdktest.SinkEnv(t, cfgOf(srv, bucket, `,"output_format":"parquet","file_rotation":"messages","max_messages_per_file":100`), c), c)
	assign(t, s, 0)
	consume(t, s, 0, msgs(0, 0, 100)) // full: encoded in the background
	second := msgs(0, 100, 100)
	err := s.deliver(0, second)
	if err == nil || !strings.Contains(err.Error(), "injected encoding failure of pre/s/t/2024-03-16/14/00000-00000000000000000000-00000000000000000099.parquet") {
		t.Fatalf("second batch: error %v, want the injected failure of the first object", err)
	}
	if _, ok := c.Committed(part(0)); ok || len(srv.Keys(t, bucket)) != 0 {
		t.Fatalf("after the failure: commit %v, objects %v; want none", ok, srv.Keys(t, bucket))
	}
	consume(t, s, 0, second) // the runtime's retry
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := 2 - fails.Load(); n != 4 {
		t.Fatalf("%d encodings, want 4 (two failed, the retry, the second object)", n)
	}
	objs := srv.ReadParquet(t, bucket)
	if len(objs) != 2 || len(objs[0].Rows) != 100 || len(objs[1].Rows) != 100 {
		t.Fatalf("%d objects, want 2 of 100 rows", len(objs))
	}
	for i, o := range objs {
		for j, r := range o.Rows {
			if r.Offset != uint64(i*100+j) || r.Payload != fmt.Sprintf(`{"p":0,"o":%d}`, i*100+j) {
				t.Fatalf("%s: row %d is %+v", o.Key, j, r)
			}
		}
	}
	if last, _ := c.Committed(part(0)); last != 199 {
		t.Fatalf("committed %d, want 199", last)
	}
}

// TestHalfWrittenKeyIsWrittenAgain: versitygw killed in the middle of a PUT (the soak's S3
// outage) leaves the object's metadata without its data: a conditional PUT is then refused
// as existing while a HEAD finds nothing. The sink retried that forever (the soak timed out
// "waiting for run 2 writing"); it now writes the key without the condition, once, and the
// object is there with its identity.
func TestHalfWrittenKeyIsWrittenAgain(t *testing.T) {
	srv := s3test.Connect(t)
	dir := os.Getenv("FERRY_S3_DIR")
	if dir == "" {
		t.Fatal("FERRY_S3_DIR is not set (scripts/s3.sh start exports it with the endpoint)")
	}
	bucket := srv.Bucket(t)
	s := open(t, cfgOf(srv, bucket, ""), sdktest.NewCommitter())
	ctx := context.Background()
	id := identity{stream: "s", topic: "t", partition: 0, first: 0, last: 9, lastTS: 42}
	key := "p/00000-00000000000000000000-00000000000000000009.jsonl"
	if err := s.st.put(ctx, key, []byte("before the crash"), "text/plain", id); err != nil {
		t.Fatal(err)
	}
	// What the server's crash left: the sidecar metadata, no data.
	if err := os.Remove(filepath.Join(dir, "data", bucket, key)); err != nil {
		t.Fatal(err)
	}
	if _, known, found, err := s.st.identity(ctx, key); err != nil || found || known {
		t.Fatalf("head of the half-written key: found %v, known %v, %v", found, known, err)
	}
	if err := s.st.put(ctx, key, []byte("written again"), "text/plain", id); err != nil {
		t.Fatalf("put over the half-written key: %v", err)
	}
	if got := string(srv.Get(t, bucket, key)); got != "written again" {
		t.Fatalf("object holds %q", got)
	}
	if got, known, found, err := s.st.identity(ctx, key); err != nil || !found || !known || got != id {
		t.Fatalf("identity %+v known %v found %v, %v", got, known, found, err)
	}
	// A key that now holds the object is refused as written, as before.
	if err := s.st.put(ctx, key, []byte("again"), "text/plain", id); !errors.Is(err, errExists) {
		t.Fatalf("third put: %v, want errExists", err)
	}
}

// TestCloseWaitsForItsUploads: Close returns only once every upload it started in the
// background has ended (one that ctx cut short is cancelled), so no upload of a closed
// sink goes on using its connections. It returned with the upload still under way, which
// left an HTTP connection of the closed sink behind when the upload landed after the
// sink closed its idle ones (goleak found it after the crash-at-every-step tests).
func TestCloseWaitsForItsUploads(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	c := sdktest.NewCommitter()
	sink := New()
	returned := make(chan struct{}) // closed once Close returned
	// The object's encoding, in the background, holds its upload until Close cancelled
	// the uploads, and then until Close returned (at most a second: Close now waits).
	sink.encodeFault = func(string) error {
		<-sink.puts.Done()
		select {
		case <-returned:
		case <-time.After(time.Second):
		}
		return errors.New("injected: the upload outlived its context")
	}
	s := openWith(t, sink, sdktest.SinkEnv(t, cfgOf(srv, bucket, `,"output_format":"parquet","file_rotation":"messages","max_messages_per_file":10`), c), c)
	assign(t, s, 0)
	consume(t, s, 0, msgs(0, 0, 10)) // full: its upload starts in the background
	s.mu.Lock()
	f := s.parts[part(0)].inflight
	s.mu.Unlock()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Close(ended) // a stop out of time: the upload is cancelled, not waited for
	select {
	case <-f.done:
	default:
		t.Fatal("Close returned while its upload was still running")
	}
	close(returned)
	if _, ok := c.Committed(part(0)); ok {
		t.Fatal("committed an upload that did not land")
	}
}

// TestClosedStoreLeavesNoConnection: once the sink closed its S3 client, none of its
// connections is left open and none is dialed again. A request cut short while its
// connection was being dialed left the dial going, and the connection it made then waited
// in the idle pool of the closed sink (goleak found it after the crash-at-every-step
// tests, whose crashed instances close under an ended context); a request after the close
// stands for that late dial.
func TestClosedStoreLeavesNoConnection(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	before := goleak.IgnoreCurrent()
	s := New()
	if err := s.Open(context.Background(), sdktest.SinkEnv(t, cfgOf(srv, bucket, ""), sdktest.NewCommitter())); err != nil {
		t.Fatal(err)
	}
	if _, err := s.st.exists(context.Background(), "k"); err != nil { // a second connection's worth of use
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.st.exists(context.Background(), "k"); !errors.Is(err, errStoreClosed) {
		t.Fatalf("a request after close: %v, want errStoreClosed", err)
	}
	goleak.VerifyNone(t, before)
}
