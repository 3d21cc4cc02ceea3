package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// runBucket is a harness's plugin_config: the bucket of the run under way, so that each
// run (and what a crashed instance still uploads after its crash) has a bucket of its
// own. The kit marshals the config at every open, so MarshalJSON names the current one.
type runBucket struct {
	srv    *s3test.Server
	bucket *atomic.Pointer[string]
	extra  string
}

func (c runBucket) MarshalJSON() ([]byte, error) {
	return []byte(cfgOf(c.srv, c.current(), c.extra)), nil
}

func (c runBucket) current() string { return *c.bucket.Load() }

// noUploads fails when bucket holds a multipart upload not completed or aborted.
func noUploads(ctx context.Context, srv *s3test.Server, bucket string) error {
	out, err := srv.Client.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		return err
	}
	for _, u := range out.Uploads {
		return fmt.Errorf("s3://%s/%s: a multipart upload left (%d in all)", bucket, aws.ToString(u.Key), len(out.Uploads))
	}
	return nil
}

// harness runs the sink against the S3 server with extra in its plugin_config, reading
// back every JSON Lines object of the run's bucket through the AWS SDK.
func harness(srv *s3test.Server, name, extra string) sdktest.SinkHarness {
	var bucket atomic.Pointer[string]
	runs := 0
	return sdktest.SinkHarness{
		New:            func() sdk.Sink { return New() },
		Config:         runBucket{srv, &bucket, `,"output_format":"json_lines","flush_interval":"1h"` + extra},
		SinkControlled: true,
		Guarantee:      sdktest.ExactlyOnce,
		Reset: func(ctx context.Context) error {
			runs++
			b := fmt.Sprintf("%s-%d-%d", name, runs, time.Now().UnixNano()%1e9)
			if _, err := srv.Client.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
				return err
			}
			bucket.Store(&b)
			return nil
		},
		Read: func(ctx context.Context) ([]sdktest.Record, error) { return readJSONLines(ctx, srv, *bucket.Load()) },
	}
}

// readJSONLines reads every record of bucket's objects; a key that is no JSON Lines
// object (a partial object left behind) is an error.
func readJSONLines(ctx context.Context, srv *s3test.Server, bucket string) ([]sdktest.Record, error) {
	var recs []sdktest.Record
	p := awss3.NewListObjectsV2Paginator(srv.Client, &awss3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if !strings.HasSuffix(key, ".jsonl") {
				return nil, fmt.Errorf("s3://%s/%s: not an object of the sink", bucket, key)
			}
			out, err := srv.Client.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			if err != nil {
				return nil, err
			}
			body, err := io.ReadAll(out.Body)
			_ = out.Body.Close()
			if err != nil {
				return nil, err
			}
			for i, line := range bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n")) {
				var r struct {
					Offset    uint64          `json:"offset"`
					Partition uint32          `json:"partition_id"`
					Payload   json.RawMessage `json:"payload"`
				}
				if err := json.Unmarshal(line, &r); err != nil {
					return nil, fmt.Errorf("s3://%s/%s line %d: %w", bucket, key, i+1, err)
				}
				recs = append(recs, sdktest.Record{Partition: r.Partition, Offset: r.Offset, Payload: r.Payload})
			}
		}
	}
	return recs, nil
}

// TestCrashAtEveryStepExactlyOnce: the sink's stated guarantee, exactly once, against the
// real S3 server through the kit's runtime sequence (open, assignment with the sink's
// seek, batches of 10 on 3 partitions, the runtime storing what the sink committed, a
// rebalance that takes partition 0 away and gives it back, close), run whole and then
// once per step with a crash there (the instance dropped, its uploads under way left to
// land or not) and a new instance to the end: each of the 90 messages is in the bucket
// exactly once. Objects of 7 messages end inside batches, so uploads run in the
// background across the steps, and a memory cap of a few messages cuts objects early,
// where the other partitions' buffers say: an instance's objects then end elsewhere than
// its predecessor's, and only the seek past the bucket keeps a range from being written
// twice under another key.
func TestCrashAtEveryStepExactlyOnce(t *testing.T) {
	srv := s3test.Connect(t)
	harness(srv, "crash", `,"file_rotation":"messages","max_messages_per_file":7,"max_buffered_bytes":"1500"`).CrashAtEveryStep(t)
}

// TestCrashAtEveryStepStreamedExactlyOnce: the same with objects streamed through
// multipart uploads (messages of 400KiB, parts of 5MiB): a crash while a partition's
// object streams leaves its upload and parts behind, which the partition's next
// assignment aborts; each message is in the bucket exactly once, and no partial object
// or incomplete upload is left.
func TestCrashAtEveryStepStreamedExactlyOnce(t *testing.T) {
	srv := s3test.Connect(t)
	pad := strings.Repeat("z", 400<<10)
	h := harness(srv, "crash-streamed", `,"part_size":"5MiB","max_file_size":"24MiB"`)
	h.Partitions, h.Messages, h.Batch = 2, 16, 4
	h.Payload = func(p uint32, o uint64) []byte { return fmt.Appendf(nil, `{"p":%d,"o":%d,"pad":"%s"}`, p, o, pad) }
	read := h.Read
	h.Read = func(ctx context.Context) ([]sdktest.Record, error) {
		recs, err := read(ctx)
		if err == nil {
			err = noUploads(ctx, srv, h.Config.(runBucket).current())
		}
		return recs, err
	}
	h.CrashAtEveryStep(t)
}
