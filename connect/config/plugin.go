package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// PluginSearchDirs returns where a relative plugin path's file name is searched after the
// path itself, as upstream: the executable's directory, the working directory, /usr/lib,
// /usr/lib64, /lib, /lib64, /usr/local/lib, /usr/local/lib64.
func PluginSearchDirs() []string {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		dirs = append(dirs, wd)
	}
	return append(dirs, "/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib", "/usr/local/lib64")
}

// ResolvePluginPath finds the native plugin library for a connector's path, as upstream: the
// OS extension (.so on Linux, .dylib on macOS, .dll on Windows) is appended unless the path
// ends in .so, .dylib or .dll; an existing path (relative to the working directory) is used;
// otherwise, for a relative path, its file name is looked for in dirs (nil means
// [PluginSearchDirs]). The error wraps [ErrPluginNotFound] and names the path and every
// directory searched. A "builtin:" path is an error: it names no file.
func ResolvePluginPath(path string, dirs []string) (string, error) {
	if strings.HasPrefix(path, BuiltinPrefix) {
		return "", fmt.Errorf("plugin path %q names a built-in connector, not a library", path)
	}
	if path == "" {
		return "", errors.New("plugin path is empty")
	}
	p := path
	switch filepath.Ext(p) {
	case ".so", ".dylib", ".dll":
	default:
		p += osLibExt()
	}
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return p, nil
	}
	if filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: %s does not exist", ErrPluginNotFound, p)
	}
	if dirs == nil {
		dirs = PluginSearchDirs()
	}
	base := filepath.Base(p)
	for _, d := range dirs {
		c := filepath.Join(d, base)
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c, nil
		}
	}
	return "", fmt.Errorf("%w: %s (from path %q) not found relative to the working directory, nor as %s in: %s",
		ErrPluginNotFound, p, path, base, strings.Join(dirs, ", "))
}

func osLibExt() string {
	switch runtime.GOOS {
	case "darwin":
		return ".dylib"
	case "windows":
		return ".dll"
	}
	return ".so"
}

// Plugins is the Ferry-only [plugins] section: the directories native plugins may be
// loaded from. A plugin is code the runtime runs as its own user, and a connector's path
// can come from the HTTP API (POST …/configs), so the path alone must not decide.
type Plugins struct {
	// Directories lists where a native plugin's file (after its symlinks and ".." are
	// resolved) must be, subdirectories included; relative entries are relative to the
	// working directory. Empty: [DefaultPluginDirs].
	Directories []string `toml:"directories"`
}

// PluginDirs returns the directories native plugins may be loaded from: [plugins]
// directories, or by default the connectors' config_dir and the executable's directory.
func (r *Runtime) PluginDirs() []string {
	if len(r.Plugins.Directories) > 0 {
		return r.Plugins.Directories
	}
	return DefaultPluginDirs(r.Connectors.ConfigDir)
}

// DefaultPluginDirs is the default of [plugins] directories: configDir (when not "") and
// the directory of the running executable.
func DefaultPluginDirs(configDir string) []string {
	var dirs []string
	if configDir != "" {
		dirs = append(dirs, configDir)
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	return dirs
}

// LoadablePluginPath resolves a connector's plugin path as [ResolvePluginPath] does and
// returns the library's real path (symlinks and ".." resolved) when it lies inside one of
// allowed; open that path, not the one given. Errors wrap [ErrPluginNotFound], or
// [ErrPluginNotAllowed] naming the path, its real path and every allowed directory.
func LoadablePluginPath(path string, allowed []string) (string, error) {
	resolved, err := ResolvePluginPath(path, nil)
	if err != nil {
		return "", err
	}
	file, err := realPath(resolved)
	if err != nil {
		return "", fmt.Errorf("plugin path %q: %w", path, err)
	}
	if inside(file, allowed) {
		return file, nil
	}
	return "", fmt.Errorf("%w: plugin path %q is %s, outside the plugin directories (%s); add its directory to [plugins] directories of the runtime config to allow it",
		ErrPluginNotAllowed, path, file, dirList(allowed))
}

// CheckPluginPlace refuses a connector's plugin path that points outside allowed, whether
// the library exists yet or not, for a config that is being created (POST …/configs):
// one that exists is judged by its real path, as [LoadablePluginPath] does; one that does
// not by where it points ([pointsTo]: from the working directory, every existing part's
// symlinks resolved, ".." applied in order), so that "plugins/../../evil" is refused
// before a library is put there. The error wraps [ErrPluginNotAllowed]; nil for a path
// inside allowed, or that is not a library path at all (a built-in, an empty path).
func CheckPluginPlace(path string, allowed []string) error {
	_, err := LoadablePluginPath(path, allowed)
	if !errors.Is(err, ErrPluginNotFound) {
		if errors.Is(err, ErrPluginNotAllowed) {
			return err
		}
		return nil
	}
	p := path
	switch filepath.Ext(p) {
	case ".so", ".dylib", ".dll":
	default:
		p += osLibExt()
	}
	target, err := pointsTo(p)
	if err != nil {
		return fmt.Errorf("%w: plugin path %q: %w", ErrPluginNotAllowed, path, err)
	}
	if inside(target, allowed) {
		return nil
	}
	return fmt.Errorf("%w: plugin path %q points to %s (which does not exist), outside the plugin directories (%s); add its directory to [plugins] directories of the runtime config to allow it",
		ErrPluginNotAllowed, path, target, dirList(allowed))
}

// pointsTo is where p leads, as the system would resolve it once it exists: from the
// working directory (p relative) or the root, each existing component replaced by its
// real path (so a ".." after a symlinked directory leaves the link's target), and the
// components from the first missing one on applied as text.
func pointsTo(p string) (string, error) {
	start := string(filepath.Separator)
	if !filepath.IsAbs(p) {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		p = wd + string(filepath.Separator) + p
	}
	cur, err := filepath.EvalSymlinks(start)
	if err != nil {
		return "", err
	}
	missing := false
	for _, c := range strings.Split(filepath.ToSlash(p), "/") {
		switch {
		case c == "" || c == ".":
		case c == "..":
			cur = filepath.Dir(cur) // cur is real: its parent is the physical one
		case missing:
			cur = filepath.Join(cur, c)
		default:
			next := filepath.Join(cur, c)
			if _, err := os.Lstat(next); err != nil {
				missing, cur = true, next
				continue
			}
			if cur, err = filepath.EvalSymlinks(next); err != nil {
				return "", err
			}
		}
	}
	return cur, nil
}

// inside reports whether file (a real path) lies in one of dirs (resolved) or below it.
func inside(file string, dirs []string) bool {
	for _, d := range dirs {
		rd, err := realPath(d)
		if err != nil {
			continue // a directory that does not exist holds nothing
		}
		if rel, err := filepath.Rel(rd, file); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

func dirList(dirs []string) string {
	if len(dirs) == 0 {
		return "none"
	}
	return strings.Join(dirs, ", ")
}

// realPath is the absolute path of p with every symlink and ".." resolved.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}
