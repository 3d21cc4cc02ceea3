package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

func TestCheckOutputPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ok := []string{filepath.Join(dir, "new.jsonl"), file, filepath.Join(dir, "a", "b", "new.jsonl")}
	for _, p := range ok {
		if err := CheckOutputPath(p); err != nil {
			t.Errorf("CheckOutputPath(%s) = %v", p, err)
		}
	}
	bad := map[string]string{
		"":                            "empty path",
		filepath.Join(file, "x"):      file + " is not a directory (in the path of " + filepath.Join(file, "x") + ")",
		filepath.Join(file, "y", "z"): file + " is not a directory (in the path of " + filepath.Join(file, "y", "z") + ")",
		dir:                           dir + " exists and is not a regular file",
	}
	for p, want := range bad {
		if err := CheckOutputPath(p); err == nil || err.Error() != want {
			t.Errorf("CheckOutputPath(%q) = %v, want %q", p, err, want)
		}
	}
	for _, p := range []string{filepath.Join(dir, "new.jsonl"), filepath.Join(dir, "a")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("CheckOutputPath created %s: %v", p, err)
		}
	}
}

// TestCheckOutputPaths: only the spec's output-path fields are checked, each error names
// its field.
func TestCheckOutputPaths(t *testing.T) {
	dir := t.TempDir()
	spec := sdk.ConfigSpec{Fields: []sdk.ConfigField{{Name: "path", Type: sdk.TypeOutputPath}, {Name: "name", Type: sdk.TypeString}}}
	raw := []byte(`{"path":` + strconvQuote(dir) + `,"name":` + strconvQuote(dir) + `}`)
	got := CheckOutputPaths(spec, raw)
	want := []error{&sdk.FieldError{Field: "path", Msg: dir + " exists and is not a regular file"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CheckOutputPaths = %v, want %v", got, want)
	}
	if errs := CheckOutputPaths(spec, []byte(`{"path":`+strconvQuote(filepath.Join(dir, "ok.jsonl"))+`}`)); errs != nil {
		t.Fatalf("writable path: %v", errs)
	}
}

func strconvQuote(s string) string { return strconv.Quote(s) }
