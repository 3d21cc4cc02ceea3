package s3

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/sdk"
)

// preflight runs Preflight on cfg and returns its problems' texts, each an *sdk.FieldError.
func preflight(t *testing.T, cfg string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for _, err := range New().Preflight(ctx, []byte(cfg)) {
		var fe *sdk.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("Preflight: %v (%T), want an *sdk.FieldError", err, err)
		}
		out = append(out, err.Error())
	}
	return out
}

// TestPreflight: `ferry check --connect` of the S3 sink against versitygw: a bucket that
// may be listed and written passes, and the probe object it wrote under the prefix is gone
// again (the bucket holds nothing); a missing bucket, a wrong secret key, an unknown access
// key and an endpoint where nothing listens are each refused naming the key to fix. No
// secret is shown.
func TestPreflight(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	if got := preflight(t, cfgOf(srv, bucket, "")); got != nil {
		t.Fatalf("a writable bucket: %q", got)
	}
	if keys := srv.Keys(t, bucket); len(keys) != 0 {
		t.Fatalf("the bucket after the check holds %q, want nothing (the probe removed)", keys)
	}
	ep := srv.Endpoint
	for _, tc := range []struct {
		what, cfg, want string
	}{
		{"missing bucket", cfgOf(srv, bucket+"-nope", ""),
			`plugin_config.bucket: bucket "` + bucket + `-nope" does not exist at ` + ep + `; fix: create it (aws s3 mb s3://` + bucket + `-nope, or the store's console), or correct bucket`},
		{"wrong secret", strings.Replace(cfgOf(srv, bucket, ""), srv.SecretKey, "not-the-secret", 1),
			`plugin_config.secret_access_key: ` + ep + ` refused the requests' signature: the secret key of access_key_id and secret_access_key does not match its access key (SignatureDoesNotMatch); fix: correct the secret key`},
		{"unknown access key", strings.Replace(cfgOf(srv, bucket, ""), `"access_key_id":"`+srv.AccessKey+`"`, `"access_key_id":"nobody"`, 1),
			`plugin_config.access_key_id: ` + ep + ` does not know the access key of access_key_id and secret_access_key (XAdminUserNotFound); fix: correct the access key`},
	} {
		got := preflight(t, tc.cfg)
		if fmt.Sprint(got) != fmt.Sprint([]string{tc.want}) {
			t.Errorf("%s:\n got %q\nwant %q", tc.what, got, tc.want)
		}
		if strings.Contains(strings.Join(got, ""), srv.SecretKey) {
			t.Errorf("%s: the secret key shown: %q", tc.what, got)
		}
	}
	got := preflight(t, strings.Replace(cfgOf(srv, bucket, ""), ep, "http://127.0.0.1:1", 1))
	if len(got) != 1 || !strings.HasPrefix(got[0], "plugin_config.endpoint: cannot reach http://127.0.0.1:1 to list: ") ||
		!strings.Contains(got[0], "connection refused") || !strings.HasSuffix(got[0], "; fix: start the server, or correct endpoint (and region)") {
		t.Errorf("nothing listening: %q", got)
	}
}
