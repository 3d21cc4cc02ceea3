package conformance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// s3-soak runs the S3 sink (builtin:s3) into a bucket of its own, JSON Lines, while the
// runtime is SIGKILLed Config.Soak times, and judges from the bucket only: every object is
// read back and each produced (partition, offset) must be in exactly one line. The kills
// alternate between a random (seeded) moment and a held offset store (the storeGate of
// postgres-soak): the sink committed after an upload, the gate holds the runtime's store,
// and the kill leaves objects in the bucket past the group's stored offset, which a sink
// that trusts Iggy's offset writes again. Objects hold few messages and idle partitions are
// flushed quickly, so boundaries depend on timing and a second write of a range would show
// as a duplicated line, not as the same key.

// S3Target is the S3-compatible server of s3-soak: Endpoint (http://host:port), Region and
// static credentials. The suite creates a bucket per run and empties and removes it at the
// end (unless Keep).
type S3Target struct {
	Endpoint, Region, AccessKey, SecretKey string
}

// ParseS3Target reads "http://ACCESS:SECRET@host:port[?region=R]"; without user info the
// keys come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. Errors never show the secret.
func ParseS3Target(s string) (S3Target, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return S3Target{}, errors.New("want http://ACCESS:SECRET@host:port[?region=R]")
	}
	t := S3Target{Endpoint: u.Scheme + "://" + u.Host, Region: u.Query().Get("region")}
	if t.Region == "" {
		t.Region = "us-east-1"
	}
	if u.User != nil {
		t.AccessKey = u.User.Username()
		t.SecretKey, _ = u.User.Password()
	} else {
		t.AccessKey, t.SecretKey = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	}
	if t.AccessKey == "" || t.SecretKey == "" {
		return S3Target{}, errors.New("no credentials: put ACCESS:SECRET@ in the URL or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	return t, nil
}

// s3Soak is one s3-soak run: the fixture, the client and the bucket.
type s3Soak struct {
	f      *fixture
	client *s3.Client
	bucket string
}

// s3Line is the part of a JSON Lines record the judge reads.
type s3Line struct {
	Offset    *uint64 `json:"offset"`
	Partition *uint32 `json:"partition_id"`
	Payload   struct {
		P *uint32 `json:"p"`
		N *uint64 `json:"n"`
	} `json:"payload"`
}

// tally reads every object of the bucket.
func (s *s3Soak) tally(ctx context.Context) (pgTally, error) {
	t, _, err := s.read(ctx)
	return t, err
}

// read reads every object of the bucket: the tally and the highest offset per partition.
func (s *s3Soak) read(ctx context.Context) (pgTally, map[uint32]int64, error) {
	var t pgTally
	seen := map[pkey]int{}
	max := map[uint32]int64{}
	for q := uint32(0); q < s.f.partitions; q++ {
		max[q] = -1
	}
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return t, nil, fmt.Errorf("list bucket %s: %w", s.bucket, err)
		}
		for _, o := range page.Contents {
			if err := s.readObject(ctx, aws.ToString(o.Key), &t, seen); err != nil {
				return t, nil, err
			}
		}
	}
	for k := range seen {
		if int64(k.off) > max[k.p] {
			max[k.p] = int64(k.off)
		}
	}
	for k := range s.f.sent {
		if n := seen[k]; n == 0 {
			t.lost++
		} else {
			t.covered++
			t.duplicated += n - 1
		}
	}
	return t, max, nil
}

func (s *s3Soak) readObject(ctx context.Context, key string, t *pgTally, seen map[pkey]int) error {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("read s3://%s/%s: %w", s.bucket, key, err)
	}
	body, err := io.ReadAll(out.Body)
	_ = out.Body.Close()
	if err != nil {
		return fmt.Errorf("read s3://%s/%s: %w", s.bucket, key, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var l s3Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Offset == nil || l.Partition == nil {
			return fmt.Errorf("s3://%s/%s line %d: not a record with offset and partition_id: %.80s", s.bucket, key, n, sc.Text())
		}
		t.rows++
		k := pkey{*l.Partition, *l.Offset}
		if _, ok := s.f.sent[k]; !ok {
			t.unknown++
			continue
		}
		if l.Payload.P == nil || l.Payload.N == nil || *l.Payload.P != k.p || *l.Payload.N != k.off {
			t.corrupt++
		}
		seen[k]++
	}
	return sc.Err()
}

// maxWritten returns the highest offset in the bucket per partition (-1 = none).
func (s *s3Soak) maxWritten(ctx context.Context) (map[uint32]int64, error) {
	_, max, err := s.read(ctx)
	return max, err
}

// cleanup empties and removes the bucket.
func (s *s3Soak) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			break
		}
		for _, o := range page.Contents {
			_, _ = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: o.Key})
		}
	}
	_, _ = s.client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(s.bucket)})
}

func runS3Soak(ctx context.Context, r *Runner, mode string) Result {
	kills := r.cfg.Soak
	expected := fmt.Sprintf("%d SIGKILLs: lost 0, duplicated 0 (exactly-once into S3)", kills)
	tg := r.cfg.S3
	if tg == nil {
		return unsupported(expected, errors.New("no S3 server given (--s3 URL)"))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	s := &s3Soak{client: s3.New(s3.Options{
		Region: tg.Region, BaseEndpoint: aws.String(tg.Endpoint), UsePathStyle: true,
		HTTPClient:  &http.Client{Transport: tr},
		Credentials: credentials.NewStaticCredentialsProvider(tg.AccessKey, tg.SecretKey, ""),
	})}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return broken(expected, err)
	}
	s.bucket = "ferry-conformance-" + hex.EncodeToString(b)
	if _, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.bucket)}); err != nil {
		return broken(expected, fmt.Errorf("S3 (--s3 %s): create bucket %s: %w", tg.Endpoint, s.bucket, err))
	}
	r.log.Info("s3-soak bucket", "mode", mode, "bucket", s.bucket, "kept", r.cfg.Keep)
	if !r.cfg.Keep {
		defer s.cleanup()
	}
	pc := map[string]string{
		"bucket": strconv.Quote(s.bucket), "region": strconv.Quote(tg.Region), "endpoint": strconv.Quote(tg.Endpoint),
		"access_key_id": strconv.Quote(tg.AccessKey), "secret_access_key": strconv.Quote(tg.SecretKey),
		"output_format": `"json_lines"`, "file_rotation": `"messages"`, "max_messages_per_file": "37",
		"flush_interval": `"150ms"`, "max_attempts": "2", "retry_delay": `"50ms"`,
	}
	f, gate, p, err := r.soakStart(ctx, "s3-soak", mode, connector{batch: 20, schema: "json", maxRetries: -1, plugin: "builtin:s3", pluginConfig: pc},
		func(f *fixture) { s.f = f })
	if err != nil {
		return broken(expected, err)
	}
	defer gate.close()
	defer func() { p.kill() }()
	rng := mrand.New(mrand.NewSource(r.cfg.Seed))
	fail := func(err error) Result { return broken(expected, err) }
	err = f.wait(ctx, "the S3 sink's first object", func() bool {
		t, err := s.tally(ctx)
		return p.exited() || (err == nil && t.rows > 0)
	})
	if err == nil && p.exited() {
		err = fmt.Errorf("before the S3 sink wrote an object: %w", exitError(p))
	}
	if err != nil {
		return unsupported(expected, fmt.Errorf("%w; runtime log: %s", err, oneLine(p.tail(5))))
	}
	var held, ahead, noStore int
	if p, held, ahead, noStore, err = alternateKills(ctx, f, s, p, gate, rng, kills); err != nil {
		return fail(err)
	}
	how := fmt.Sprintf("%d at held offset stores (%d with objects past the stored offset), %d at random moments", held, ahead, kills-held)
	return soakFinish(ctx, expected, f, s, p, kills, noStore, how)
}
