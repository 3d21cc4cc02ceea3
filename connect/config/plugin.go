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
