package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/ferryio/ferry/sdk"
)

var _ sdk.Preflighter = (*Sink)(nil)

// probePrefix starts the name of the object Preflight writes and removes. The sink's own
// objects are named by partition and offsets, so its listings never take a probe for one.
const probePrefix = ".ferry-check-"

// Preflight implements sdk.Preflighter (`ferry check --connect`) with the requests the sink
// makes: a LIST under prefix (the server answers at endpoint, knows the credentials, the
// bucket exists and may be listed), then a conditional PUT of a small probe object under
// prefix (writes are allowed, If-None-Match is accepted), which is then deleted. The probe
// is the one thing --connect writes; a DELETE that is refused leaves it, and is reported
// with its key. Each problem names its plugin_config key and the fix.
func (s *Sink) Preflight(ctx context.Context, raw []byte) []error {
	cfg, err := Config.Parse(raw)
	if err != nil {
		return []error{err}
	}
	st, err := newStore(ctx, cfg)
	if err != nil {
		return []error{sdk.FieldErr("region", "%v", err)}
	}
	defer st.close()
	_, err = st.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(cfg.Bucket), Prefix: aws.String(cfg.Prefix), MaxKeys: aws.Int32(1)})
	if err != nil {
		return []error{explain(cfg, "list", err)}
	}
	key := probeKey(cfg.Prefix)
	body := []byte("written by ferry check --connect to test that the S3 sink may write here; it deletes it at once\n")
	_, err = st.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(cfg.Bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String("text/plain"), IfNoneMatch: aws.String("*"),
	})
	if err != nil {
		return []error{explain(cfg, "put a probe object under prefix", err)}
	}
	if _, err := st.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(cfg.Bucket), Key: aws.String(key)}); err != nil {
		return []error{sdk.FieldErr("prefix", "the probe object s3://%s/%s was written but could not be deleted: %s; fix: delete it, and grant s3:DeleteObject under prefix (the sink deletes the partial objects of uploads above part_size)",
			cfg.Bucket, key, apiText(err))}
	}
	return nil
}

// probeKey is a fresh probe object's key under prefix.
func probeKey(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := probePrefix + hex.EncodeToString(b[:])
	if prefix != "" {
		key = prefix + "/" + key
	}
	return key
}

// explain turns a failed request of Preflight into the problem it shows, under the key
// that fixes it.
func explain(cfg config, what string, err error) error {
	where := "AWS S3 in " + cfg.Region
	if cfg.Endpoint != "" {
		where = cfg.Endpoint
	}
	creds := "access_key_id and secret_access_key"
	if cfg.AccessKeyID.IsZero() {
		creds = "the AWS credential chain (AWS_ACCESS_KEY_ID…, the shared profile, the instance role; access_key_id and secret_access_key are not set)"
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		if status(err) == 0 {
			return sdk.FieldErr("endpoint", "cannot reach %s to %s: %v; fix: start the server, or correct endpoint (and region)", where, what, err)
		}
		return sdk.FieldErr("bucket", "%s in bucket %q at %s: %v", what, cfg.Bucket, where, err)
	}
	switch ae.ErrorCode() {
	case "NoSuchBucket":
		return sdk.FieldErr("bucket", "bucket %q does not exist at %s; fix: create it (aws s3 mb s3://%s, or the store's console), or correct bucket", cfg.Bucket, where, cfg.Bucket)
	case "InvalidAccessKeyId", "XAdminUserNotFound": // the second: versitygw's
		return sdk.FieldErr("access_key_id", "%s does not know the access key of %s (%s); fix: correct the access key", where, creds, ae.ErrorCode())
	case "SignatureDoesNotMatch":
		return sdk.FieldErr("secret_access_key", "%s refused the requests' signature: the secret key of %s does not match its access key (%s); fix: correct the secret key", where, creds, ae.ErrorCode())
	case "AccessDenied", "Forbidden":
		return sdk.FieldErr("bucket", "%s: access denied to %s in bucket %q (%s); fix: grant the credentials s3:ListBucket on the bucket and s3:GetObject and s3:PutObject under prefix", where, what, cfg.Bucket, ae.ErrorCode())
	case "PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException":
		return sdk.FieldErr("region", "bucket %q is not in region %q (%s); fix: set region to the bucket's", cfg.Bucket, cfg.Region, apiText(err))
	case "NotImplemented":
		return sdk.FieldErr("endpoint", "%s does not support what the sink needs to %s (%s); the sink writes with conditional PUTs (If-None-Match: *)", where, what, apiText(err))
	}
	return sdk.FieldErr("bucket", "%s in bucket %q at %s: %s", what, cfg.Bucket, where, apiText(err))
}

// apiText is the server's code and message of err, or err's text.
func apiText(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return fmt.Sprintf("%s: %s", ae.ErrorCode(), ae.ErrorMessage())
	}
	return err.Error()
}
