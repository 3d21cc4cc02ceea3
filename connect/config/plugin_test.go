package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadablePluginPath: a library is loadable only when its real path (symlinks and ".."
// resolved) lies in an allowed directory or below it; the refusal names the path, the
// real path and every allowed directory.
func TestLoadablePluginPath(t *testing.T) {
	root := t.TempDir()
	allowed := filepath.Join(root, "plugins")
	outside := filepath.Join(root, "elsewhere")
	for _, d := range []string{filepath.Join(allowed, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) string {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write(filepath.Join(allowed, "sub", "good.so"))
	evil := write(filepath.Join(outside, "evil.so"))
	linkOut := filepath.Join(allowed, "out.so")
	linkIn := filepath.Join(outside, "in.so")
	linkDir := filepath.Join(root, "dirlink")
	for old, link := range map[string]string{evil: linkOut, good: linkIn, allowed: linkDir} {
		if err := os.Symlink(old, link); err != nil {
			t.Fatal(err)
		}
	}
	// A sibling whose name starts with the allowed directory's is not inside it.
	prefix := filepath.Join(root, "plugins-evil")
	if err := os.Mkdir(prefix, 0o755); err != nil {
		t.Fatal(err)
	}
	sibling := write(filepath.Join(prefix, "x.so"))

	for _, tc := range []struct {
		path string
		dirs []string
		want string // the real path, or "" for a refusal
		real string // the refused library's real path
	}{
		{good, []string{allowed}, good, ""},
		{strings.TrimSuffix(good, ".so"), []string{allowed}, good, ""},
		{linkIn, []string{allowed}, good, ""},                                                // a link from outside to a library inside
		{good, []string{linkDir}, good, ""},                                                  // the allowed directory is itself a link
		{filepath.Join(allowed, "sub", "..", "sub", "good.so"), []string{allowed}, good, ""}, // ".." that stays inside
		{evil, []string{allowed}, "", evil},
		{linkOut, []string{allowed}, "", evil},
		{allowed + "/../elsewhere/evil.so", []string{allowed}, "", evil},
		{sibling, []string{allowed}, "", sibling},
		{good, nil, "", good},
		{good, []string{filepath.Join(root, "missing"), outside}, "", good},
	} {
		got, err := LoadablePluginPath(tc.path, tc.dirs)
		if tc.want != "" {
			if err != nil || got != tc.want {
				t.Errorf("LoadablePluginPath(%q, %v) = %q, %v; want %q", tc.path, tc.dirs, got, err, tc.want)
			}
			continue
		}
		list := "none"
		if len(tc.dirs) > 0 {
			list = strings.Join(tc.dirs, ", ")
		}
		want := `plugin library not in an allowed directory: plugin path "` + tc.path + `" is ` + tc.real +
			`, outside the plugin directories (` + list + `); add its directory to [plugins] directories of the runtime config to allow it`
		if !errors.Is(err, ErrPluginNotAllowed) || err.Error() != want || got != "" {
			t.Errorf("LoadablePluginPath(%q, %v) = %q, %v; want the error %q", tc.path, tc.dirs, got, err, want)
		}
	}
	if _, err := LoadablePluginPath(filepath.Join(allowed, "missing.so"), []string{allowed}); !errors.Is(err, ErrPluginNotFound) {
		t.Errorf("a missing library: %v, want ErrPluginNotFound", err)
	}
}

// TestPluginDirs: [plugins] directories from the file or the environment replaces the
// default, which is config_dir and the executable's directory.
func TestPluginDirs(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte("[connectors]\nconfig_dir = \"conns\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ParseRuntimeEnv(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.PluginDirs(), ","); got != "conns,"+filepath.Dir(exe) {
		t.Errorf("default plugin dirs %q", got)
	}
	if err := os.WriteFile(cfg, []byte("[connectors]\nconfig_dir = \"conns\"\n\n[plugins]\ndirectories = [\"/opt/plugins\", \"lib\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err = ParseRuntimeEnv(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.PluginDirs(), ","); got != "/opt/plugins,lib" {
		t.Errorf("plugin dirs from the file %q", got)
	}
	if !strings.Contains(r.String(), "[plugins]\ndirectories = ['/opt/plugins', 'lib']") {
		t.Errorf("the rendered config lacks [plugins]:\n%s", r.String())
	}
	if r, err = ParseRuntimeEnv(cfg, []string{"IGGY_CONNECTORS_PLUGINS_DIRECTORIES=[/srv/a, /srv/b]"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.PluginDirs(), ","); got != "/srv/a,/srv/b" {
		t.Errorf("plugin dirs from the environment %q", got)
	}
}

// TestCheckPluginPlace: a plugin path that does not exist yet is judged by where it
// points: from the working directory, its existing parts' symlinks resolved before a ".."
// is applied. "plugins/../../evil" and a missing file below a link that leaves the plugin
// directory are refused with what they point to; a missing file below the plugin
// directory (or below a link into it) is accepted. Before, any path that did not exist
// passed (it was refused only at load, after the API had stored it).
func TestCheckPluginPlace(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	allowed := filepath.Join(root, "app", "plugins")
	outside := filepath.Join(root, "elsewhere", "deep")
	for _, d := range []string{allowed, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(allowed, "out") // a link in the plugin directory to a directory outside
	in := filepath.Join(root, "in")      // a link outside to the plugin directory
	for old, link := range map[string]string{outside: out, allowed: in} {
		if err := os.Symlink(old, link); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(filepath.Join(root, "app"))
	dirs := []string{allowed}
	for _, tc := range []struct {
		path, points string // points: "" when accepted
	}{
		{"plugins/../../evil", filepath.Join(root, "evil.so")},
		{allowed + "/../../evil", filepath.Join(root, "evil.so")},
		{allowed + "/../plugins-x/new.so", filepath.Join(root, "app", "plugins-x", "new.so")},
		{out + "/new", filepath.Join(outside, "new.so")},
		{out + "/../new.so", filepath.Join(root, "elsewhere", "new.so")}, // inside by its text, not in fact
		{"plugins/out/missing/../../x", filepath.Join(root, "elsewhere", "x.so")},
		{"plugins/new", ""},
		{allowed + "/sub/dir/new.so", ""},
		{in + "/new", ""},
		{"../app/plugins/./new", ""},
		{"builtin:null", ""},
	} {
		err := CheckPluginPlace(tc.path, dirs)
		if tc.points == "" {
			if err != nil {
				t.Errorf("CheckPluginPlace(%q): %v, want accepted", tc.path, err)
			}
			continue
		}
		want := `plugin library not in an allowed directory: plugin path "` + tc.path + `" points to ` + tc.points +
			` (which does not exist), outside the plugin directories (` + allowed + `); add its directory to [plugins] directories of the runtime config to allow it`
		if !errors.Is(err, ErrPluginNotAllowed) || err == nil || err.Error() != want {
			t.Errorf("CheckPluginPlace(%q) = %v\nwant %s", tc.path, err, want)
		}
	}
	// A library that exists is judged by its real path, as LoadablePluginPath does.
	evil := filepath.Join(outside, "evil.so")
	if err := os.WriteFile(evil, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := `plugin library not in an allowed directory: plugin path "plugins/out/evil.so" is ` + evil + `, outside the plugin directories (` + allowed + `); add its directory to [plugins] directories of the runtime config to allow it`
	if err := CheckPluginPlace("plugins/out/evil.so", dirs); err == nil || err.Error() != want {
		t.Errorf("an existing library through a link: %v\nwant %s", err, want)
	}
}
