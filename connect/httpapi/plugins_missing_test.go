package httpapi

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestPluginPathNotThereYetRefused: POST …/configs with a native plugin path that does not
// exist yet is judged by where it points (from the working directory, the existing
// parts' symlinks resolved before ".."), as one that exists is judged by its real path:
// "<config_dir>/../../evil", a missing file below a link in config_dir to a directory
// outside, and a ".." after that link (inside config_dir by its text) are refused 400
// naming where they point, and nothing is written; a missing file below config_dir, or
// below a link from outside into it, is created. Before, every path that did not exist
// was accepted (200) and refused only at load.
func TestPluginPathNotThereYetRefused(t *testing.T) {
	e := newEnv(t)
	a := e.serve(nil)
	body := func(path string) string {
		return `{"enabled":true,"name":"later","path":"` + path + `","streams":[{"stream":"s1","topics":["t1"],"schema":"raw"}]}`
	}
	real := func(p string) string {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	outside := real(t.TempDir())
	outLink := filepath.Join(e.dir, "outdir") // in config_dir, to a directory outside
	inLink := filepath.Join(t.TempDir(), "conns")
	for old, link := range map[string]string{outside: outLink, e.dir: inLink} {
		if err := os.Symlink(old, link); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, points string }{
		{e.dir + "/../../evil", filepath.Join(filepath.Dir(filepath.Dir(real(e.dir))), "evil.so")},
		{outLink + "/new", filepath.Join(outside, "new.so")},
		{outLink + "/../new.so", filepath.Join(filepath.Dir(outside), "new.so")},
		{outLink + "/sub/dir/lib.so", filepath.Join(outside, "sub", "dir", "lib.so")},
	} {
		a.do("POST", "/sinks/nsink/configs", body(tc.path)).wantError(t, http.StatusBadRequest, "invalid_configuration",
			`Invalid configuration: request body: path: plugin library not in an allowed directory: plugin path "`+tc.path+`" points to `+tc.points+
				` (which does not exist), outside the plugin directories (`+e.dir+`, `+filepath.Dir(exe)+`); add its directory to [plugins] directories of the runtime config to allow it`)
	}
	if m, _ := filepath.Glob(filepath.Join(e.dir, "sink_nsink_3*")); len(m) != 0 {
		t.Fatalf("a refused create wrote %v", m)
	}
	for i, path := range []string{e.dir + "/later/libsink", inLink + "/libsink.so"} {
		r := a.do("POST", "/sinks/nsink/configs", body(path)).want(t, http.StatusOK).object(t)
		if r["version"] != float64(3+i) || r["path"] != path {
			t.Fatalf("created %v, want version %d with path %s", r, 3+i, path)
		}
	}
}
