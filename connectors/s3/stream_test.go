package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// bigMsgs returns n messages of about 2000 bytes of JSON from offset first.
func bigMsgs(p uint32, first, n uint64) []sdk.ConsumedMessage {
	pad := strings.Repeat("z", 1960)
	out := make([]sdk.ConsumedMessage, n)
	for i := range out {
		o := first + uint64(i)
		out[i] = sdk.ConsumedMessage{ID: sdk.MessageIDFromUint64(o), Offset: o, Timestamp: ts0 + o,
			Payload: fmt.Appendf(nil, `{"p":%d,"o":%d,"pad":"%s"}`, p, o, pad)}
	}
	return out
}

const streamCfg = `,"part_size":"5MiB","max_file_size":"24MiB","flush_interval":"1h","max_buffered_bytes":"1GiB"`

// feedUntil consumes bigMsgs of partition 0 in batches of 500 from offset next until cond
// holds (checked after each batch), at most limit messages; it returns the next offset.
func feedUntil(t *testing.T, s *tsink, next, limit uint64, cond func() bool) uint64 {
	t.Helper()
	for end := next + limit; next < end; next += 500 {
		consume(t, s, 0, bigMsgs(0, next, 500))
		if cond() {
			return next + 500
		}
	}
	t.Fatalf("condition not reached after %d messages", limit)
	return 0
}

// TestStreamedObjectJSONLines: a 24MiB JSON Lines object goes up in 5MiB parts (more than
// three seen in flight, no object listed meanwhile), is completed once under the key of
// its planned range, committed at its last offset, and holds exactly those lines.
func TestStreamedObjectJSONLines(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	c := sdktest.NewCommitter()
	s := open(t, cfgOf(srv, bucket, streamCfg), c)
	assign(t, s, 0)
	next := feedUntil(t, s, 0, 20000, func() bool {
		ups := srv.Uploads(t, bucket)
		return len(ups) == 1 && ups[0].Parts >= 3
	})
	if keys := srv.Keys(t, bucket); len(keys) != 0 {
		t.Fatalf("objects %v listed before the upload completed", keys)
	}
	if _, ok := c.Committed(part(0)); ok {
		t.Fatal("committed before the upload completed")
	}
	next = feedUntil(t, s, next, 20000, func() bool { _, ok := c.Committed(part(0)); return ok })
	last, _ := c.Committed(part(0))
	if ups := srv.Uploads(t, bucket); len(ups) != 0 {
		t.Fatalf("uploads left after completion: %+v", ups)
	}
	keys := srv.Keys(t, bucket)
	want := fmt.Sprintf("pre/s/t/2024-03-16/14/00000-%020d-%020d.jsonl", 0, last)
	if len(keys) != 1 || keys[0] != want {
		t.Fatalf("keys %v, want [%s]", keys, want)
	}
	body := srv.Get(t, bucket, want)
	if len(body) < 4*5<<20 || len(body) > 25<<20 {
		t.Fatalf("object of %d bytes, want more than four 5MiB parts and about 24MiB", len(body))
	}
	lines := bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
	if uint64(len(lines)) != last+1 {
		t.Fatalf("%d lines, want %d", len(lines), last+1)
	}
	for i, l := range lines {
		var rec struct{ Offset uint64 }
		if err := json.Unmarshal(l, &rec); err != nil || rec.Offset != uint64(i) {
			t.Fatalf("line %d: offset %d, %v", i, rec.Offset, err)
		}
	}
	if next <= last {
		t.Fatalf("committed %d past the %d messages given", last, next)
	}
}

// TestStreamedObjectParquet: a streamed Parquet object (uncompressed, so it needs several
// parts) is read by pyarrow: exactly its offsets, in row groups ended by size (part_size)
// although row_group_size is far above the object's rows.
func TestStreamedObjectParquet(t *testing.T) {
	srv := s3test.Connect(t)
	s3test.Python(t)
	bucket := srv.Bucket(t)
	c := sdktest.NewCommitter()
	s := open(t, cfgOf(srv, bucket, streamCfg+`,"output_format":"parquet","compression":"none"`), c)
	assign(t, s, 0)
	feedUntil(t, s, 0, 40000, func() bool { _, ok := c.Committed(part(0)); return ok })
	last, _ := c.Committed(part(0))
	if ups := srv.Uploads(t, bucket); len(ups) != 0 {
		t.Fatalf("uploads left after completion: %+v", ups)
	}
	objs := srv.ReadParquet(t, bucket)
	if len(objs) != 1 || uint64(len(objs[0].Rows)) != last+1 || objs[0].RowGroups < 4 {
		t.Fatalf("%d objects; want one of %d rows in at least 4 row groups", len(objs), last+1)
	}
	if n := len(srv.Get(t, bucket, objs[0].Key)); n <= 3*5<<20 {
		t.Fatalf("object of %d bytes: fewer than 4 parts", n)
	}
	for i, r := range objs[0].Rows {
		if r.Offset != uint64(i) || r.Payload != string(bigMsgs(0, uint64(i), 1)[0].Payload) {
			t.Fatalf("row %d: offset %d, payload %.40s", i, r.Offset, r.Payload)
		}
	}
	if want := fmt.Sprintf("pre/s/t/2024-03-16/14/00000-%020d-%020d.parquet", 0, last); objs[0].Key != want {
		t.Fatalf("key %s, want %s", objs[0].Key, want)
	}
}

// TestStreamedObjectStopAndAbandoned: a stop mid-object finishes it (one object, all of
// it, committed); what a process that died mid-object left, an incomplete upload and a
// partial object, is removed by the partition's next assignment before anything is
// written, and another partition's partial object is left alone.
func TestStreamedObjectStopAndAbandoned(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	inFlight := func() bool { ups := srv.Uploads(t, bucket); return len(ups) == 1 && ups[0].Parts >= 1 }

	c := sdktest.NewCommitter()
	s := open(t, cfgOf(srv, bucket, streamCfg), c)
	assign(t, s, 0)
	next := feedUntil(t, s, 0, 10000, inFlight)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ups := srv.Uploads(t, bucket); len(ups) != 0 {
		t.Fatalf("uploads left after a stop: %+v", ups)
	}
	want := fmt.Sprintf("pre/s/t/2024-03-16/14/00000-%020d-%020d.jsonl", 0, next-1)
	if keys := srv.Keys(t, bucket); len(keys) != 1 || keys[0] != want {
		t.Fatalf("objects %v after a stop mid-object, want [%s]", keys, want)
	}
	if last, _ := c.Committed(part(0)); last != next-1 {
		t.Fatalf("a stop mid-object committed %d, want %d", last, next-1)
	}

	// dead stands for a killed process: it is never closed before the next owner starts.
	dead := open(t, cfgOf(srv, bucket, streamCfg), sdktest.NewCommitter())
	assign(t, dead, 0)
	feedUntil(t, dead, next, 10000, inFlight)
	mine := "pre/s/t/2024-03-16/14/00000-00000000000000099999.0123456789abcdef.partial"
	other := "pre/s/t/2024-03-16/14/00001-00000000000000099999.0123456789abcdef.partial"
	for _, k := range []string{mine, other} {
		if _, err := srv.Client.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: &bucket, Key: &k, Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	nc := sdktest.NewCommitter()
	nw := open(t, cfgOf(srv, bucket, streamCfg), nc)
	if got := assign(t, nw, 0); got[part(0)] != next {
		t.Fatalf("seek %v, want partition 0 at %d", got, next)
	}
	if ups := srv.Uploads(t, bucket); len(ups) != 0 {
		t.Fatalf("the next assignment left the dead owner's upload: %+v", ups)
	}
	if keys := srv.Keys(t, bucket); len(keys) != 2 || keys[0] != want || keys[1] != other {
		t.Fatalf("keys %v after the next assignment, want [%s %s]", keys, want, other)
	}
}

// TestStreamedObjectLoserReleases: while one owner streams an object, the partition is
// assigned to another (a rebalance both see late): the new owner aborts the old one's
// upload, the old one's next part finds it gone and releases the partition without
// committing, and only the new owner's object is written.
func TestStreamedObjectLoserReleases(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	oldC, newC := sdktest.NewCommitter(), sdktest.NewCommitter()
	old := open(t, cfgOf(srv, bucket, streamCfg), oldC)
	assign(t, old, 0)
	next := feedUntil(t, old, 0, 10000, func() bool { ups := srv.Uploads(t, bucket); return len(ups) == 1 && ups[0].Parts >= 1 })
	nw := open(t, cfgOf(srv, bucket, streamCfg), newC)
	assign(t, nw, 0)
	// The old owner goes on until its next part; then it holds nothing.
	for o := next; o < next+10000; o += 500 {
		consume(t, old, 0, bigMsgs(0, o, 500))
		old.mu.Lock()
		gone := old.parts[part(0)].gone
		old.mu.Unlock()
		if gone {
			break
		}
	}
	old.mu.Lock()
	if ps := old.parts[part(0)]; !ps.gone || ps.up != nil || ps.buf.size != 0 {
		t.Fatalf("old owner still holds the partition: gone %v, streaming %v, %d bytes", ps.gone, ps.up != nil, ps.buf.size)
	}
	old.mu.Unlock()
	if _, ok := oldC.Committed(part(0)); ok {
		t.Fatal("the old owner committed")
	}
	feedUntil(t, nw, 0, 20000, func() bool { _, ok := newC.Committed(part(0)); return ok })
	last, _ := newC.Committed(part(0))
	keys := srv.Keys(t, bucket)
	if want := fmt.Sprintf("pre/s/t/2024-03-16/14/00000-%020d-%020d.jsonl", 0, last); len(keys) != 1 || keys[0] != want {
		t.Fatalf("keys %v, want only the new owner's %s", keys, want)
	}
}

// TestGoneUpload: the question a part asks when its request got no answer (a server may
// close the connection on a part of an aborted upload before reading it): a live upload
// is not gone, an aborted one is.
func TestGoneUpload(t *testing.T) {
	srv := s3test.Connect(t)
	s := open(t, cfgOf(srv, srv.Bucket(t), streamCfg), sdktest.NewCommitter())
	ctx := context.Background()
	const key = "gone/object.partial"
	id, err := s.st.create(ctx, key, "application/octet-stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.st.gone(ctx, key, id) {
		t.Fatal("a live upload is reported gone")
	}
	if err := s.st.abort(ctx, key, id); err != nil {
		t.Fatal(err)
	}
	if !s.st.gone(ctx, key, id) {
		t.Fatal("an aborted upload is not reported gone")
	}
	if _, err := s.st.part(ctx, key, id, 1, []byte("x")); !errors.Is(err, errNoUpload) {
		t.Fatalf("part of an aborted upload: %v, want errNoUpload", err)
	}
}

// TestRemovePartialAfterStop: a stop that lands between an object's copy and the delete
// of its partial object (the flusher's context is cancelled by Close) does not leave the
// partial object behind.
func TestRemovePartialAfterStop(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	s := open(t, cfgOf(srv, bucket, streamCfg), sdktest.NewCommitter())
	key := "pre/s/t/2024-03-16/14/00000-00000000000000000000.0123456789abcdef.partial"
	if _, err := srv.Client.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	s.removePartial(stopped, key)
	if keys := srv.Keys(t, bucket); len(keys) != 0 {
		t.Fatalf("keys %v after removePartial with a stopped context, want none", keys)
	}
}
