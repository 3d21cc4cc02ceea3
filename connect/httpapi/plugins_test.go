package httpapi

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/internal/testkit"
)

// markerEnv names the file testdata/loaded_marker.c creates when it is loaded.
const markerEnv = "FERRY_TEST_LOADED_MARKER"

// buildMarker compiles testdata/loaded_marker.c into dir/name.so with gcc.
func buildMarker(t *testing.T, dir, name string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the plugin directory tests need gcc (CI has it)")
	}
	out := filepath.Join(dir, name+".so")
	if msg, err := exec.Command(gcc, "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
		"-o", out, filepath.Join("testdata", "loaded_marker.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, msg)
	}
	return out
}

// outsideReason is the reason of POST …/configs refusing path, whose library is file.
func outsideReason(e *env, path, file string) string {
	exe, err := os.Executable()
	if err != nil {
		e.t.Fatal(err)
	}
	return `Invalid configuration: request body: path: plugin library not in an allowed directory: plugin path "` + path + `" is ` + file +
		`, outside the plugin directories (` + e.dir + `, ` + filepath.Dir(exe) + `); add its directory to [plugins] directories of the runtime config to allow it`
}

// TestPluginOutsideDirsRefused is the second half of the attack through the API: a config
// whose path names any shared library, created with POST …/configs, ran that library's
// constructor at the next restart. A library outside the plugin directories (after its
// symlinks and ".." are resolved) is refused when the config is created and again when a
// config file names it; its constructor never runs. The same library inside a plugin
// directory is loaded: the marker works.
func TestPluginOutsideDirsRefused(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "loaded")
	t.Setenv(markerEnv, marker)
	evil := buildMarker(t, t.TempDir(), "evil")
	e := newEnv(t)
	a := e.serve(nil)
	body := func(path string) string {
		return `{"enabled":true,"name":"evil","path":"` + path + `","streams":[{"stream":"s1","topics":["t1"],"schema":"raw"}]}`
	}
	link := filepath.Join(e.dir, "link.so")
	if err := os.Symlink(evil, link); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(e.dir, evil)
	if err != nil {
		t.Fatal(err)
	}
	dotdot := e.dir + string(filepath.Separator) + rel // inside config_dir by its text, outside in fact
	for _, path := range []string{evil, strings.TrimSuffix(evil, ".so"), link, dotdot} {
		a.do("POST", "/sinks/nsink/configs", body(path)).wantError(t, http.StatusBadRequest, "invalid_configuration", outsideReason(e, path, evil))
	}
	if m, _ := filepath.Glob(filepath.Join(e.dir, "sink_nsink_3*")); len(m) != 0 {
		t.Fatalf("a refused create wrote %v", m)
	}

	// A config file written by hand (not through the API) is refused at load.
	file := filepath.Join(e.dir, "sink_nsink_3.toml")
	if err := os.WriteFile(file, []byte(strings.Replace(fixtureFiles["sink_nsink_2.toml"], `version = 2`, `version = 3`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(content), `path = "builtin:null"`, `path = "`+link+`"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	a.do("PUT", "/sinks/nsink/configs/active", `{"version":3}`).want(t, http.StatusNoContent)
	a.do("POST", "/sinks/nsink/restart", "").want(t, http.StatusNoContent)
	var st connect.Status
	testkit.WaitFor(t, "nsink refused to start", func() bool {
		st = e.status(connect.KindSink, "nsink")
		return st.State == connect.StateError && st.LastError != nil
	})
	want := `plugin library not in an allowed directory: plugin path "` + link + `" is ` + evil + `, outside the plugin directories`
	if !strings.Contains(st.LastError.Message, want) {
		t.Fatalf("last_error %q, want it to contain %q", st.LastError.Message, want)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the refused library was loaded: marker %s: %v", marker, err)
	}

	// The same library inside config_dir is accepted and loaded (then refused as no sink).
	inside := buildMarker(t, e.dir, "inside")
	r := a.do("POST", "/sinks/nsink/configs", body(inside)).want(t, http.StatusOK).object(t)
	if r["version"] != 4.0 || r["path"] != inside {
		t.Fatalf("created %v, want version 4 with path %s", r, inside)
	}
	a.do("PUT", "/sinks/nsink/configs/active", `{"version":4}`).want(t, http.StatusNoContent)
	a.do("POST", "/sinks/nsink/restart", "").want(t, http.StatusNoContent)
	testkit.WaitFor(t, "the library inside config_dir loaded", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	testkit.WaitFor(t, "nsink refused as no sink", func() bool {
		st = e.status(connect.KindSink, "nsink")
		return st.State == connect.StateError && st.LastError != nil && strings.Contains(st.LastError.Message, "iggy_sink_open")
	})
}
