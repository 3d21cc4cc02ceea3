package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestLoadDotEnv(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	envFile := writeFile(t, dir, ".env", "# comment\nIGGY_CONNECTORS_IGGY_ADDRESS=10.0.0.1:8090\nexport FROM_FILE=\"quoted value\"\nALREADY=file\n")
	t.Chdir(sub)

	// Found in a parent directory; a variable already set (even empty) is kept.
	d, err := LoadDotEnv([]string{"ALREADY=process"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Path != envFile || !reflect.DeepEqual(d.Vars, []string{"FROM_FILE=quoted value", "IGGY_CONNECTORS_IGGY_ADDRESS=10.0.0.1:8090"}) {
		t.Fatalf("got %+v", d)
	}

	// IGGY_CONNECTORS_ENV_PATH names the file instead of the search.
	other := writeFile(t, dir, "other.env", "X=1\n")
	d, err = LoadDotEnv([]string{EnvPathVar + "=" + other})
	if err != nil || d.Path != other || !reflect.DeepEqual(d.Vars, []string{"X=1"}) {
		t.Fatalf("env path: %+v %v", d, err)
	}

	// A file the variable names must exist.
	missing := filepath.Join(dir, "nope.env")
	_, err = LoadDotEnv([]string{EnvPathVar + "=" + missing})
	if !errors.Is(err, os.ErrNotExist) || err.Error() != missing+" (from IGGY_CONNECTORS_ENV_PATH): env file not found" {
		t.Fatalf("missing env path: %v", err)
	}

	// A malformed file is an error naming it.
	bad := writeFile(t, dir, "bad.env", "X='unterminated\n")
	if _, err := LoadDotEnv([]string{EnvPathVar + "=" + bad}); err == nil || !startsWith(err.Error(), bad+": cannot parse env file") {
		t.Fatalf("bad env file: %v", err)
	}

	// No .env anywhere: nothing loaded, no error.
	t.Chdir(t.TempDir())
	if d, err := LoadDotEnv(nil); err != nil || d.Path != "" || d.Vars != nil {
		t.Fatalf("no file: %+v %v", d, err)
	}
}

func startsWith(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
