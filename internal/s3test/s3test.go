// Package s3test connects tests to the S3 server of scripts/s3.sh (versitygw on loopback):
// a fresh bucket per test, and the bucket's objects read back. It knows the AWS SDK only.
package s3test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// Server is the S3 server under test.
type Server struct {
	Endpoint, AccessKey, SecretKey, Region string
	Client                                 *s3.Client
	lock                                   *os.File // restart.lock, held shared while the test runs
}

// Connect returns the server of FERRY_S3_ENDPOINT. The test is skipped when the variable is
// unset (`eval "$(bash scripts/s3.sh start)"` sets it; CI does) and fails when it is set
// but the server does not answer.
func Connect(t testing.TB) *Server {
	t.Helper()
	ep := os.Getenv("FERRY_S3_ENDPOINT")
	if ep == "" {
		t.Skip("FERRY_S3_ENDPOINT is not set: run `eval \"$(bash scripts/s3.sh start)\"` for the S3 tests")
	}
	s := &Server{Endpoint: ep, AccessKey: os.Getenv("FERRY_S3_ACCESS_KEY"),
		SecretKey: os.Getenv("FERRY_S3_SECRET_KEY"), Region: os.Getenv("FERRY_S3_REGION")}
	if s.Region == "" {
		s.Region = "us-east-1"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	s.Client = s3.New(s3.Options{
		HTTPClient:   &http.Client{Transport: tr},
		Region:       s.Region,
		BaseEndpoint: aws.String(ep),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
	// A test that restarts the server (Restart) holds this lock exclusively meanwhile, so
	// the tests of other packages, run at the same time, never see it down.
	if dir := os.Getenv("FERRY_S3_DIR"); dir != "" {
		f, err := os.OpenFile(filepath.Join(dir, "restart.lock"), os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatalf("restart lock: %v", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
			t.Fatalf("restart lock: %v", err)
		}
		s.lock = f
		t.Cleanup(func() { _ = f.Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Client.ListBuckets(ctx, &s3.ListBucketsInput{}); err != nil {
		t.Fatalf("FERRY_S3_ENDPOINT is set but the S3 server is unreachable: %v", err)
	}
	return s
}

var nonBucket = regexp.MustCompile(`[^a-z0-9-]+`)

// Bucket creates a bucket named after the test (plus a time suffix) and returns its name.
func (s *Server) Bucket(t testing.TB) string {
	t.Helper()
	name := strings.Trim(nonBucket.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	name = fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1e9)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

// Keys lists every key of bucket, in order.
func (s *Server) Keys(t testing.TB, bucket string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.Client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		page, err := p.NextPage(ctx)
		cancel()
		if err != nil {
			t.Fatalf("list %s: %v", bucket, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// Get reads one object.
func (s *Server) Get(t testing.TB, bucket, key string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := s.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get s3://%s/%s: %v", bucket, key, err)
	}
	defer func() { _ = out.Body.Close() }()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("read s3://%s/%s: %v", bucket, key, err)
	}
	return b
}

// Restart restarts the server with scripts/s3.sh (same port, same data), once no test of
// another package uses it; root is the repository root.
func (s *Server) Restart(t testing.TB, root string) {
	t.Helper()
	if s.lock == nil {
		t.Fatal("FERRY_S3_DIR is not set: the restart test needs the server of scripts/s3.sh")
	}
	if err := syscall.Flock(int(s.lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("restart lock: %v", err)
	}
	defer func() { _ = syscall.Flock(int(s.lock.Fd()), syscall.LOCK_SH) }()
	out, err := exec.Command("bash", filepath.Join(root, "scripts", "s3.sh"), "restart").CombinedOutput()
	if err != nil {
		t.Fatalf("s3 restart: %v\n%s", err, out)
	}
}

// Outage takes the server down with scripts/s3.sh (once no test of another package uses
// it), calls whileDown, polls until returns true (for at most a minute; the test fails
// then), and brings the server back on the same port with the same data; root is the
// repository root.
func (s *Server) Outage(t testing.TB, root string, whileDown func(), until func() bool) {
	t.Helper()
	if s.lock == nil {
		t.Fatal("FERRY_S3_DIR is not set: the outage test needs the server of scripts/s3.sh")
	}
	if err := syscall.Flock(int(s.lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("restart lock: %v", err)
	}
	defer func() { _ = syscall.Flock(int(s.lock.Fd()), syscall.LOCK_SH) }()
	script := filepath.Join(root, "scripts", "s3.sh")
	if out, err := exec.Command("bash", script, "down").CombinedOutput(); err != nil {
		t.Fatalf("s3 down: %v\n%s", err, out)
	}
	whileDown()
	deadline := time.Now().Add(time.Minute)
	ok := until()
	for ; !ok && time.Now().Before(deadline); ok = until() {
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := exec.Command("bash", script, "up").CombinedOutput(); err != nil {
		t.Fatalf("s3 up: %v\n%s", err, out)
	}
	if !ok {
		t.Fatal("the S3 server was down for a minute without the awaited condition")
	}
}

// Python returns the interpreter of the venv with pyarrow (FERRY_PYARROW_PYTHON, which
// scripts/s3.sh pyarrow prints); the test fails when it is unset while the S3 server is
// set, and is skipped when neither is.
func Python(t testing.TB) string {
	t.Helper()
	py := os.Getenv("FERRY_PYARROW_PYTHON")
	if py == "" {
		t.Fatal("FERRY_PYARROW_PYTHON is not set: run `eval \"$(bash scripts/s3.sh pyarrow)\"` (a venv with pyarrow) for the Parquet checks")
	}
	return py
}

// ParquetRow is one row as pyarrow read it.
type ParquetRow struct {
	Partition   uint32            `json:"partition"`
	Offset      uint64            `json:"offset"`
	Payload     string            `json:"payload"` // text, or "base64:" + the bytes
	ID          string            `json:"id"`
	Stream      string            `json:"stream"`
	Topic       string            `json:"topic"`
	TimestampUS int64             `json:"timestamp_us"`
	Headers     map[string]string `json:"headers"`
	// Columns are every column but the metadata and payload; numbers as pyarrow's JSON
	// wrote them (json.Number: 0 for an integer column, 0.0 for a double).
	Columns map[string]any `json:"columns"`
}

// ParquetObject is one object of the bucket as pyarrow read it.
type ParquetObject struct {
	Key         string       `json:"key"`
	Schema      string       `json:"schema"`
	Compression string       `json:"compression"`
	RowGroups   int          `json:"row_groups"`
	Rows        []ParquetRow `json:"rows"`
}

// ReadParquet reads every object of bucket with pyarrow (S3FileSystem straight from the
// server, pyarrow.parquet.read_table), so the files are judged by a reader nobody here
// wrote. An object pyarrow cannot read fails the test.
func (s *Server) ReadParquet(t testing.TB, bucket string) []ParquetObject {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "readparquet.py")
	cmd := exec.Command(Python(t), script, s.Endpoint, s.AccessKey, s.SecretKey, s.Region, bucket)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pyarrow read of bucket %s: %v\n%s", bucket, err, stderr.String())
	}
	var objs []ParquetObject
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	for dec.More() {
		var o ParquetObject
		if err := dec.Decode(&o); err != nil {
			t.Fatalf("pyarrow output: %v", err)
		}
		objs = append(objs, o)
	}
	return objs
}

// Upload is one multipart upload not yet completed or aborted, with its parts so far.
type Upload struct {
	Key, ID string
	Parts   int
}

// Uploads lists bucket's incomplete multipart uploads (ListMultipartUploads, then
// ListParts for each; one completed or aborted in between is left out).
func (s *Server) Uploads(t testing.TB, bucket string) []Upload {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ups []Upload
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)}
	for {
		out, err := s.Client.ListMultipartUploads(ctx, in)
		if err != nil {
			t.Fatalf("list multipart uploads of %s: %v", bucket, err)
		}
		for _, u := range out.Uploads {
			parts, err := s.Client.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId})
			var ae smithy.APIError
			if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload" {
				continue // completed or aborted since it was listed
			}
			if err != nil {
				t.Fatalf("list parts of s3://%s/%s: %v", bucket, aws.ToString(u.Key), err)
			}
			ups = append(ups, Upload{Key: aws.ToString(u.Key), ID: aws.ToString(u.UploadId), Parts: len(parts.Parts)})
		}
		if !aws.ToBool(out.IsTruncated) {
			return ups
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}
