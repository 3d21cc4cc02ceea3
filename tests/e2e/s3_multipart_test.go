package e2e

import (
	"fmt"
	"github.com/ferryio/ferry/internal/testkit"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/s3test"
)

// TestS3MultipartSIGKILL: objects of about 16MiB (more than three 5MiB parts) stream
// through multipart uploads; ferry is SIGKILLed twice while a part of an object is in
// flight, then runs to the end: pyarrow reads every message exactly once, the objects'
// ranges are contiguous, no incomplete upload and no partial object is left, and at least
// one object is larger than three parts.
func TestS3MultipartSIGKILL(t *testing.T) {
	const perPartition, pad = 12000, 1800
	srv := s3test.Connect(t)
	s3test.Python(t)
	bucket := srv.Bucket(t)
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 3)
	conns := filepath.Join(dir, "s3")
	cfg := strings.NewReplacer(
		"file_rotation = \"messages\"\nmax_messages_per_file = 700\n", "compression = \"none\"\npart_size = \"5MiB\"\nmax_file_size = \"16MiB\"\n",
		`flush_interval = "300ms"`, `flush_interval = "2s"`,
		`max_buffered_bytes = "300KB"`, `max_buffered_bytes = "256MiB"`).Replace(s3Sink(srv, bucket))
	if !strings.Contains(cfg, `part_size = "5MiB"`) || !strings.Contains(cfg, `"256MiB"`) {
		t.Fatalf("connector file not rewritten:\n%s", cfg)
	}
	writeFile(t, filepath.Join(conns, "sink.toml"), cfg)
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}

	var wg sync.WaitGroup
	var prodErr error
	wg.Go(func() { prodErr = producePadded(c, 3, 0, perPartition, 100*time.Millisecond, pad) })
	seen := map[string]bool{} // upload ids of the runs killed
	run := startFerry(t, "run 0", dir, nil, args...)
	for i := 1; i <= 2; i++ {
		var id string
		testkit.WaitFor(t, fmt.Sprintf("run %d with a part of a new upload in flight", i-1), func() bool {
			if run.exited() {
				t.Fatalf("run %d exited: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
			}
			for _, u := range srv.Uploads(t, bucket) {
				if !seen[u.ID] && u.Parts >= 2 {
					id = u.ID
					return true
				}
			}
			return false
		})
		run.kill()
		ups := srv.Uploads(t, bucket)
		for _, u := range ups {
			seen[u.ID] = true
		}
		t.Logf("kill %d: %d uploads in flight (%s), %d objects", i, len(ups), id, len(srv.Keys(t, bucket)))
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
	}
	wg.Wait()
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	// While a run is live a partial object exists for a moment (completed, not yet copied).
	written := func() (n uint64) {
		for _, k := range srv.Keys(t, bucket) {
			if m := s3KeyRE.FindStringSubmatch(k); m != nil {
				first, _ := strconv.ParseUint(m[2], 10, 64)
				last, _ := strconv.ParseUint(m[3], 10, 64)
				n += last - first + 1
			}
		}
		return n
	}
	testkit.WaitFor(t, "every message in the bucket", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return written() >= 3*perPartition
	})
	run.stop(30 * time.Second)
	if ups := srv.Uploads(t, bucket); len(ups) != 0 {
		t.Fatalf("incomplete multipart uploads left: %+v", ups)
	}
	if !strings.Contains(run.out.String(), "s3 sink open") {
		t.Fatalf("last run never opened the sink:\n%s", tail(run.out.String(), 30))
	}
	big := 0
	for _, k := range srv.Keys(t, bucket) { // s3Ranges refused any partial object already
		if n := len(srv.Get(t, bucket, k)); n > 3*5<<20 {
			big++
		}
	}
	if big == 0 {
		t.Fatal("no object larger than three 5MiB parts")
	}
	rows := checkExactlyOncePadded(t, srv, bucket, perPartition, pad)
	t.Logf("2 kills mid-upload: %d rows in %d objects (%d of more than three parts), 0 lost, 0 duplicated, no upload left",
		rows, len(srv.Keys(t, bucket)), big)
}
