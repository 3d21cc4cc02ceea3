package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// store is the sink's view of one bucket: a conditional PUT and a LIST.
type store struct {
	client *s3.Client
	bucket string
	trs    *transports // closed with the sink, so no idle connection outlives it
}

// transports remembers the HTTP transports the SDK built for the client (a custom CA
// bundle in AWS_CA_BUNDLE makes it build its own from ours).
type transports struct {
	mu  sync.Mutex
	all []*http.Transport
}

func (t *transports) add(tr *http.Transport) {
	t.mu.Lock()
	t.all = append(t.all, tr)
	t.mu.Unlock()
}

func (t *transports) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tr := range t.all {
		tr.CloseIdleConnections()
	}
}

// newStore builds the client: static credentials when both keys are set, else the standard
// AWS chain (AWS_ACCESS_KEY_ID…, the shared profile, the instance role). The SDK's own
// retries are off: the sink retries whole uploads (max_attempts) and the runtime whole
// batches.
func newStore(ctx context.Context, s settings) (*store, error) {
	trs := &transports{}
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(s.Region),
		awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(trs.add)),
		awsconfig.WithRetryer(func() aws.Retryer { return retry.AddWithMaxAttempts(retry.NewStandard(), 1) }),
	}
	if s.AccessKeyID != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(s.AccessKeyID, s.SecretAccessKey, "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if s.Endpoint != "" {
			o.BaseEndpoint = aws.String(s.Endpoint)
		}
		o.UsePathStyle = s.pathStyle
		// Only what S3 requires: S3-compatible stores differ in the checksums they accept.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &store{client: client, bucket: s.Bucket, trs: trs}, nil
}

func (st *store) close() { st.trs.close() }

// check answers whether the bucket exists and may be listed; the error names the bucket.
func (st *store) check(ctx context.Context) error {
	_, err := st.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(st.bucket)})
	switch status(err) {
	case 0:
		return err
	case http.StatusOK:
		return nil
	case http.StatusNotFound:
		return fmt.Errorf("bucket %q does not exist", st.bucket)
	case http.StatusForbidden:
		return fmt.Errorf("access to bucket %q denied (check the credentials and the bucket policy: the sink needs s3:ListBucket and s3:PutObject)", st.bucket)
	}
	return fmt.Errorf("bucket %q: %w", st.bucket, err)
}

// errExists is put's answer when the key already holds an object.
var errExists = errors.New("object exists")

// put uploads body under key only if no object has that key (If-None-Match: *). It
// returns errExists when one does: the key names its offsets, so it holds these messages.
func (st *store) put(ctx context.Context, key string, body []byte, contentType string) error {
	_, err := st.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(st.bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String(contentType),
		IfNoneMatch:   aws.String("*"),
	})
	switch status(err) {
	case http.StatusOK:
		return nil
	case http.StatusPreconditionFailed:
		return errExists
	case http.StatusForbidden:
		return fmt.Errorf("put s3://%s/%s: access denied: %w", st.bucket, key, err)
	case http.StatusNotFound:
		return fmt.Errorf("put s3://%s/%s: bucket %q does not exist: %w", st.bucket, key, st.bucket, err)
	}
	return fmt.Errorf("put s3://%s/%s: %w", st.bucket, key, err)
}

// list calls fn with every key under prefix.
func (st *store) list(ctx context.Context, prefix string, fn func(key string)) error {
	p := s3.NewListObjectsV2Paginator(st.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(st.bucket),
		Prefix: aws.String(prefix),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list s3://%s/%s: %w", st.bucket, prefix, err)
		}
		for _, o := range page.Contents {
			fn(aws.ToString(o.Key))
		}
	}
	return nil
}

// status is the HTTP status of an SDK call's outcome: 200 for nil, 0 when no response came.
func status(err error) int {
	if err == nil {
		return http.StatusOK
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "PreconditionFailed" {
		return http.StatusPreconditionFailed
	}
	return 0
}
