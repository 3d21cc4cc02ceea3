package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantErr checks that err is an *Error with exactly file, line and key.
func wantErr(t *testing.T, err error, file string, line int, key, env string) *Error {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not *config.Error", err, err)
	}
	if ce.File != file || ce.Line != line || ce.Key != key || ce.Env != env {
		t.Fatalf("error %q: got file=%q line=%d key=%q env=%q; want file=%q line=%d key=%q env=%q",
			ce.Error(), ce.File, ce.Line, ce.Key, ce.Env, file, line, key, env)
	}
	return ce
}
