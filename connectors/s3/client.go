package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// store is the sink's view of one bucket: a conditional PUT and a LIST.
type store struct {
	client *s3.Client
	bucket string
	trs    *transports // closed with the sink, so no idle connection outlives it
	log    *slog.Logger
}

// transports remembers the HTTP transports the SDK built for the client (a custom CA
// bundle in AWS_CA_BUNDLE makes it build its own from ours) and every connection they
// dialed, so that closing the store closes them all and refuses new ones: a request cut
// short while its connection was being dialed leaves the dial going, and the connection
// would otherwise join the idle pool after the sink closed it and wait there until the
// transport's idle timeout.
type transports struct {
	mu     sync.Mutex
	all    []*http.Transport
	conns  map[*trackedConn]struct{}
	closed bool
}

// errStoreClosed is the dial's answer once the store is closed.
var errStoreClosed = errors.New("the sink's S3 client is closed")

func (t *transports) add(tr *http.Transport) {
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.closed {
			_ = c.Close()
			return nil, errStoreClosed
		}
		tc := &trackedConn{Conn: c, t: t}
		t.conns[tc] = struct{}{}
		return tc, nil
	}
	t.mu.Lock()
	t.all = append(t.all, tr)
	t.mu.Unlock()
}

// close closes every connection, idle or not (the sink uses none any more), and makes
// later dials fail.
func (t *transports) close() {
	t.mu.Lock()
	t.closed = true
	conns := t.conns
	t.conns = map[*trackedConn]struct{}{}
	all := t.all
	t.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
	for _, tr := range all {
		tr.CloseIdleConnections()
	}
}

// trackedConn is a connection its transports forget when it closes.
type trackedConn struct {
	net.Conn
	t *transports
}

func (c *trackedConn) Close() error {
	c.t.mu.Lock()
	delete(c.t.conns, c)
	c.t.mu.Unlock()
	return c.Conn.Close()
}

// newStore builds the client: static credentials when both keys are set, else the standard
// AWS chain (AWS_ACCESS_KEY_ID…, the shared profile, the instance role). The SDK's own
// retries are off: the sink retries each request of an upload (max_attempts, sdk.Retry)
// and the runtime whole batches.
func newStore(ctx context.Context, s config) (*store, error) {
	trs := &transports{conns: map[*trackedConn]struct{}{}}
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(s.Region),
		awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(trs.add)),
		awsconfig.WithRetryer(func() aws.Retryer { return retry.AddWithMaxAttempts(retry.NewStandard(), 1) }),
	}
	if !s.AccessKeyID.IsZero() {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(s.AccessKeyID.Reveal(), s.SecretAccessKey.Reveal(), "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if s.Endpoint != "" {
			o.BaseEndpoint = aws.String(s.Endpoint)
		}
		o.UsePathStyle = s.PathStyle
		// Only what S3 requires: S3-compatible stores differ in the checksums they accept.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &store{client: client, bucket: s.Bucket, trs: trs, log: slog.New(slog.DiscardHandler)}, nil
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
		return fmt.Errorf("access to bucket %q denied (check the credentials and the bucket policy: the sink needs s3:ListBucket, s3:PutObject and s3:GetObject)", st.bucket)
	}
	return fmt.Errorf("bucket %q: %w", st.bucket, err)
}

// errVanished is verify's answer when a key refused as taken holds no object.
var errVanished = errors.New("the key holds no object")

// errExists is put's answer when the key already holds this very object: its identity
// metadata names the range uploaded.
var errExists = errors.New("object exists")

// put uploads body under key, id in its metadata, only if no object has that key
// (If-None-Match: *). When one does, it returns errExists if that object is id's (the
// range was written before: a retry, a crash, another owner), a *foreignError if not.
//
// A key refused as taken that then holds no object (vanished: deleted in between, or a
// server that crashed while writing it left its metadata without its data, as versitygw's
// POSIX backend does when killed mid-PUT) is written again without the condition: there
// is nothing there to keep, and the same range always has the same content.
func (st *store) put(ctx context.Context, key string, body []byte, contentType string, id identity) error {
	err := st.putObject(ctx, key, body, contentType, id, true)
	if errors.Is(err, errVanished) {
		st.log.Warn("s3 sink: the key was refused as taken but holds no object; writing it without the condition", "key", key)
		err = st.putObject(ctx, key, body, contentType, id, false)
	}
	return err
}

func (st *store) putObject(ctx context.Context, key string, body []byte, contentType string, id identity, onlyNew bool) error {
	_, err := st.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(st.bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String(contentType),
		Metadata:      id.meta(),
		IfNoneMatch:   ifNoneMatch(onlyNew),
	})
	switch status(err) {
	case http.StatusOK:
		return nil
	case http.StatusPreconditionFailed:
		return st.verify(ctx, key, id)
	case http.StatusForbidden:
		return fmt.Errorf("put s3://%s/%s: access denied: %w", st.bucket, key, err)
	case http.StatusNotFound:
		return fmt.Errorf("put s3://%s/%s: bucket %q does not exist: %w", st.bucket, key, st.bucket, err)
	}
	return fmt.Errorf("put s3://%s/%s: %w", st.bucket, key, err)
}

// verify answers, for a key an upload of id found taken, errExists when the object there
// is id's and a *foreignError when it is not.
func (st *store) verify(ctx context.Context, key string, want identity) error {
	got, known, found, err := st.identity(ctx, key)
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("put s3://%s/%s: refused as existing, then not found: %w", st.bucket, key, errVanished)
	case known && got.same(want):
		return errExists
	}
	return &foreignError{bucket: st.bucket, key: key, want: want, got: got, known: known}
}

// identity reads the identity metadata of the object at key (HEAD): known is false when it
// has none, found false when there is no object.
func (st *store) identity(ctx context.Context, key string) (id identity, known, found bool, err error) {
	out, err := st.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(st.bucket), Key: aws.String(key)})
	switch status(err) {
	case http.StatusOK:
		id, known = identityOf(out.Metadata)
		return id, known, true, nil
	case http.StatusNotFound:
		return id, false, false, nil
	}
	return id, false, false, fmt.Errorf("head s3://%s/%s: %w", st.bucket, key, err)
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

// errNoUpload is complete's answer when the multipart upload is gone (aborted by another
// owner of the partition, or completed by an attempt whose answer was lost).
var errNoUpload = errors.New("multipart upload not found")

// create starts a multipart upload of key, with meta as the object's user metadata, and
// returns its id.
func (st *store) create(ctx context.Context, key, contentType string, meta map[string]string) (string, error) {
	out, err := st.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket:      aws.String(st.bucket),
		Key:         aws.String(key),
		ContentType: aws.String(contentType),
		Metadata:    meta,
	})
	if err != nil {
		return "", fmt.Errorf("start multipart upload of s3://%s/%s: %w", st.bucket, key, err)
	}
	return aws.ToString(out.UploadId), nil
}

// part uploads part n (from 1) of an upload and returns its ETag. Sending a part again
// replaces it, so a retry is harmless.
func (st *store) part(ctx context.Context, key, id string, n int32, body []byte) (string, error) {
	out, err := st.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket:        aws.String(st.bucket),
		Key:           aws.String(key),
		UploadId:      aws.String(id),
		PartNumber:    aws.Int32(n),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
	})
	code := status(err)
	if code == 0 && ctx.Err() == nil && st.gone(ctx, key, id) {
		// A server may refuse a part of an upload that is gone before reading its body and
		// close the connection, so the client sees a reset instead of the 404: asked apart.
		code = http.StatusNotFound
	}
	if code == http.StatusNotFound {
		return "", fmt.Errorf("part %d of s3://%s/%s: %w", n, st.bucket, key, errNoUpload)
	}
	if err != nil {
		return "", fmt.Errorf("part %d of s3://%s/%s: %w", n, st.bucket, key, err)
	}
	return aws.ToString(out.ETag), nil
}

// gone reports whether the server answers that upload id of key does not exist (any other
// answer, or none, is not taken for gone).
func (st *store) gone(ctx context.Context, key, id string) bool {
	_, err := st.client.ListParts(ctx, &s3.ListPartsInput{
		Bucket:   aws.String(st.bucket),
		Key:      aws.String(key),
		UploadId: aws.String(id),
		MaxParts: aws.Int32(1),
	})
	return status(err) == http.StatusNotFound
}

// complete assembles an upload's parts into the object; when onlyNew, only if no object
// has the key (If-None-Match: *): errExists when one does. errNoUpload: the upload is gone.
func (st *store) complete(ctx context.Context, key, id string, etags []string, onlyNew bool) error {
	parts := make([]types.CompletedPart, len(etags))
	for i, e := range etags {
		parts[i] = types.CompletedPart{ETag: aws.String(e), PartNumber: aws.Int32(int32(i + 1))}
	}
	_, err := st.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(st.bucket),
		Key:             aws.String(key),
		UploadId:        aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		IfNoneMatch:     ifNoneMatch(onlyNew),
	})
	switch status(err) {
	case http.StatusOK:
		return nil
	case http.StatusPreconditionFailed:
		return errExists
	case http.StatusNotFound:
		return fmt.Errorf("complete s3://%s/%s: %w", st.bucket, key, errNoUpload)
	}
	return fmt.Errorf("complete s3://%s/%s: %w", st.bucket, key, err)
}

// abort discards an upload and its parts; one already gone counts as aborted.
func (st *store) abort(ctx context.Context, key, id string) error {
	_, err := st.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket:   aws.String(st.bucket),
		Key:      aws.String(key),
		UploadId: aws.String(id),
	})
	if s := status(err); s == http.StatusOK || s == http.StatusNotFound {
		return nil
	}
	return fmt.Errorf("abort multipart upload of s3://%s/%s: %w", st.bucket, key, err)
}

// exists answers whether key holds an object.
func (st *store) exists(ctx context.Context, key string) (bool, error) {
	_, err := st.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(st.bucket), Key: aws.String(key)})
	switch status(err) {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, fmt.Errorf("head s3://%s/%s: %w", st.bucket, key, err)
}

// uploads calls fn with the key and id of every multipart upload under prefix not yet
// completed or aborted.
func (st *store) uploads(ctx context.Context, prefix string, fn func(key, id string)) error {
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(st.bucket), Prefix: aws.String(prefix)}
	for {
		out, err := st.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return fmt.Errorf("list multipart uploads under s3://%s/%s: %w", st.bucket, prefix, err)
		}
		for _, u := range out.Uploads {
			fn(aws.ToString(u.Key), aws.ToString(u.UploadId))
		}
		if !aws.ToBool(out.IsTruncated) {
			return nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

func ifNoneMatch(onlyNew bool) *string {
	if onlyNew {
		return aws.String("*")
	}
	return nil
}

// copy writes the object at src to dst inside the server, as a multipart upload whose
// parts are copies of src's byte ranges of the given sizes, with ident in its metadata,
// completed only if no object has the key dst (when one does: errExists if it is ident's,
// a *foreignError if not). errNoUpload: src is gone.
func (st *store) copy(ctx context.Context, src, dst, contentType string, sizes []int64, ident identity) error {
	id, err := st.create(ctx, dst, contentType, ident.meta())
	if err != nil {
		return err
	}
	source := (&url.URL{Path: st.bucket + "/" + src}).EscapedPath()
	etags := make([]string, 0, len(sizes))
	var off int64
	for i, n := range sizes {
		out, err := st.client.UploadPartCopy(ctx, &s3.UploadPartCopyInput{
			Bucket:          aws.String(st.bucket),
			Key:             aws.String(dst),
			UploadId:        aws.String(id),
			PartNumber:      aws.Int32(int32(i + 1)),
			CopySource:      aws.String(source),
			CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)),
		})
		if err != nil {
			_ = st.abort(context.WithoutCancel(ctx), dst, id)
			if status(err) == http.StatusNotFound {
				return fmt.Errorf("copy s3://%s/%s to %s: %w", st.bucket, src, dst, errNoUpload)
			}
			return fmt.Errorf("copy s3://%s/%s to %s, part %d: %w", st.bucket, src, dst, i+1, err)
		}
		if out.CopyPartResult != nil {
			etags = append(etags, aws.ToString(out.CopyPartResult.ETag))
		}
		off += n
	}
	err = st.complete(ctx, dst, id, etags, true)
	if errors.Is(err, errExists) {
		if err = st.verify(ctx, dst, ident); errors.Is(err, errVanished) {
			st.log.Warn("s3 sink: the key was refused as taken but holds no object; completing it without the condition", "key", dst)
			err = st.complete(ctx, dst, id, etags, false)
		}
		if err == nil {
			return nil
		}
		if errors.Is(err, errExists) {
			_ = st.abort(context.WithoutCancel(ctx), dst, id)
			return err
		}
	}
	if err != nil {
		_ = st.abort(context.WithoutCancel(ctx), dst, id)
		if errors.Is(err, errNoUpload) { // our own upload of dst, just created: not src's absence
			return fmt.Errorf("copy to s3://%s/%s: upload vanished", st.bucket, dst)
		}
		if errors.Is(err, errExists) {
			return st.verify(ctx, dst, ident)
		}
	}
	return err
}

// remove deletes key; an absent key counts as deleted.
func (st *store) remove(ctx context.Context, key string) error {
	_, err := st.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(st.bucket), Key: aws.String(key)})
	if s := status(err); s == http.StatusOK || s == http.StatusNotFound || s == http.StatusNoContent {
		return nil
	}
	return fmt.Errorf("delete s3://%s/%s: %w", st.bucket, key, err)
}
