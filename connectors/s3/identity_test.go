package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/internal/syncbuf"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// putObject writes an object as another writer would: body under key, with meta (nil:
// no user metadata).
func putObject(t *testing.T, srv *s3test.Server, bucket, key string, meta map[string]string) {
	t.Helper()
	if _, err := srv.Client.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: strings.NewReader("{}\n"), Metadata: meta}); err != nil {
		t.Fatal(err)
	}
}

// openLogged is open with the sink's log in the returned buffer.
func openLogged(t *testing.T, cfg string, c *sdktest.Committer) (*tsink, *syncbuf.Buffer) {
	t.Helper()
	var logs syncbuf.Buffer
	env := sdktest.SinkEnv(t, cfg, c)
	env.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return openWith(t, New(), env, c), &logs
}

// TestForeignObjectNotCountedAsWritten: an upload whose key another writer took meanwhile
// (an object of another topic's range under the same key, as two sinks keying alike write)
// is refused by the conditional PUT; that 412 counts as written only when the object's
// identity metadata names this range, so here the upload fails with both identities
// named and nothing is committed, however often it is retried; the other object stays.
// The streamed path (the server-side copy completed with If-None-Match) answers alike.
// A sink assigned the partition afterwards refuses to resume after that object.
func TestForeignObjectNotCountedAsWritten(t *testing.T) {
	srv := s3test.Connect(t)
	other := identity{stream: "s", topic: "other", partition: 0, first: 0, last: 9}
	t.Run("put", func(t *testing.T) {
		bucket := srv.Bucket(t)
		c := sdktest.NewCommitter()
		s := open(t, cfgOf(srv, bucket, `,"file_rotation":"messages","max_messages_per_file":10,"max_attempts":2,"retry_delay":"1ms"`), c)
		assign(t, s, 0)
		key := "pre/s/t/2024-03-16/14/00000-00000000000000000000-00000000000000000009.jsonl"
		putObject(t, srv, bucket, key, other.meta())
		batch := msgs(0, 0, 10)
		want := fmt.Sprintf(`s3 sink: upload of stream "s" topic "t" partition 0 offsets 0-9 to s3://%s/%s refused: the key already holds the object of stream "s" topic "other" partition 0 offsets 0-9; not counted as written`, bucket, key)
		for range 3 { // the upload in the background, then two retries of the batch
			err := s.deliver(0, batch)
			if err == nil {
				s.mu.Lock()
				f := s.parts[part(0)].inflight
				s.mu.Unlock()
				<-f.done
				continue
			}
			if !errors.Is(err, errForeign) || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("consume: %v\nwant %s…", err, want)
			}
		}
		if err := s.Close(context.Background()); !errors.Is(err, errForeign) {
			t.Fatalf("close: %v, want the foreign object's error", err)
		}
		if _, ok := c.Committed(part(0)); ok {
			t.Fatal("committed over another writer's object")
		}
		if got := string(srv.Get(t, bucket, key)); got != "{}\n" {
			t.Fatalf("the other object now holds %q", got)
		}
		// The next owner of the partition: the highest object is not this partition's.
		s2 := open(t, cfgOf(srv, bucket, ""), sdktest.NewCommitter())
		_, err := s2.Assigned(context.Background(), topic, []sdk.Partition{part(0)})
		wantSeek := fmt.Sprintf(`s3 sink: partition 0 of s/t: the highest object of the partition, s3://%s/%s, is the object of stream "s" topic "other" partition 0 offsets 0-9, not of this partition`, bucket, key)
		if err == nil || !strings.HasPrefix(err.Error(), wantSeek) {
			t.Fatalf("assigned: %v\nwant %s…", err, wantSeek)
		}
	})
	t.Run("streamed", func(t *testing.T) {
		bucket := srv.Bucket(t)
		c := sdktest.NewCommitter()
		s := open(t, cfgOf(srv, bucket, `,"part_size":"5MiB","file_rotation":"messages","max_messages_per_file":3000,"flush_interval":"1h","max_buffered_bytes":"1GiB","max_attempts":1`), c)
		assign(t, s, 0)
		key := "pre/s/t/2024-03-16/14/00000-00000000000000000000-00000000000000002999.jsonl"
		putObject(t, srv, bucket, key, identity{stream: "s", topic: "t", partition: 1, first: 0, last: 2999}.meta())
		var err error
		for next := uint64(0); next < 3000 && err == nil; next += 500 {
			err = s.deliver(0, bigMsgs(0, next, 500))
		}
		want := fmt.Sprintf(`s3 sink: upload of stream "s" topic "t" partition 0 offsets 0-2999 to s3://%s/%s refused: the key already holds the object of stream "s" topic "t" partition 1 offsets 0-2999`, bucket, key)
		if !errors.Is(err, errForeign) || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("consume: %v\nwant %s…", err, want)
		}
		if _, ok := c.Committed(part(0)); ok {
			t.Fatal("committed over another writer's object")
		}
		if got := string(srv.Get(t, bucket, key)); got != "{}\n" {
			t.Fatalf("the other object now holds %d bytes", len(got))
		}
		// It was streamed: its partial object waits for the copy, which the next call tries again.
		if keys := srv.Keys(t, bucket); len(keys) != 2 || keys[0] != key || !strings.HasSuffix(keys[1], ".partial") {
			t.Fatalf("keys %v; want the partial object and the other writer's", keys)
		}
	})
}

// TestOlderObjectsResume: objects written by an older version carry no identity metadata.
// Where the keys did not change (the template holds {stream} and {topic} as segments and
// sanitizing leaves the names alone) they count as before: the partition resumes after
// them. Where the sink now keys otherwise ("{stream}/{date}" gets /{topic}; a sanitized
// name gets a hash), the older layout could not tell topics apart, so its objects are not
// counted (the partition resumes from Iggy's offset) and a WARN names them.
func TestOlderObjectsResume(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	putObject(t, srv, bucket, "pre/s/t/2024-03-16/14/00000-00000000000000000000-00000000000000000099.jsonl", nil)
	putObject(t, srv, bucket, "pre/s/t/2024-03-16/15/00000-00000000000000000100-00000000000000000149.jsonl", nil)
	s, logs := openLogged(t, cfgOf(srv, bucket, ""), sdktest.NewCommitter())
	if got := assign(t, s, 0); len(got) != 1 || got[part(0)] != 150 {
		t.Fatalf("default template: seek %v, want partition 0 at 150", got)
	}
	if strings.Contains(logs.String(), "older key layout") {
		t.Fatalf("a warning about the unchanged layout:\n%s", logs.String())
	}

	bucket = srv.Bucket(t)
	putObject(t, srv, bucket, "pre/s/2024-03-16/00000-00000000000000000000-00000000000000000099.jsonl", nil)
	s, logs = openLogged(t, cfgOf(srv, bucket, `,"path_template":"{stream}/{date}"`), sdktest.NewCommitter())
	if !strings.Contains(logs.String(), `key_template={stream}/{date}/{topic}`) {
		t.Fatalf("open did not say the key template:\n%s", logs.String())
	}
	if got := assign(t, s, 0); len(got) != 0 {
		t.Fatalf("{stream}/{date}: seek %v, want none (the older layout is not counted)", got)
	}
	for _, want := range []string{`level=WARN msg="s3 sink: objects under an older key layout not counted`, "partition=0 objects=1",
		"highest=pre/s/2024-03-16/00000-00000000000000000000-00000000000000000099.jsonl"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, logs.String())
		}
	}
	consume(t, s, 0, msgs(0, 0, 3))
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	keys := srv.Keys(t, bucket)
	if want := "pre/s/2024-03-16/t/00000-00000000000000000000-00000000000000000002.jsonl"; len(keys) != 2 || keys[1] != want {
		t.Fatalf("keys %v; want the older object and %s", keys, want)
	}
	if n := bytes.Count(srv.Get(t, bucket, keys[1]), []byte("\n")); n != 3 {
		t.Fatalf("the new object holds %d lines, want 3", n)
	}
}
