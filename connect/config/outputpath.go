package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/ferryio/ferry/sdk"
)

// CheckOutputPaths checks on disk every output-path field (sdk.TypeOutputPath) of a
// built-in connector's plugin_config raw, as `ferry check` does: each is a *sdk.FieldError
// naming the field. Fields absent or not strings are left to spec.Validate. Nothing is
// created.
func CheckOutputPaths(spec sdk.ConfigSpec, raw []byte) []error {
	var obj map[string]any
	if json.Unmarshal(raw, &obj) != nil {
		return nil // spec.Validate reports it
	}
	var errs []error
	for _, f := range spec.Fields {
		if f.Type != sdk.TypeOutputPath {
			continue
		}
		if p, ok := obj[f.Name].(string); ok {
			if err := CheckOutputPath(p); err != nil {
				errs = append(errs, &sdk.FieldError{Field: f.Name, Msg: err.Error()})
			}
		}
	}
	return errs
}

// CheckOutputPath says whether a connector could create (with its missing directories) or
// append to the file at path, without creating anything: an empty path, a path through a
// regular file, an unwritable directory, or an existing path that is not a writable regular
// file is an error.
func CheckOutputPath(path string) error {
	if path == "" {
		return errors.New("empty path")
	}
	if st, err := os.Stat(path); err == nil {
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s exists and is not a regular file", path)
		}
		if err := unix.Access(path, unix.W_OK); err != nil {
			return fmt.Errorf("%s is not writable: %w", path, err)
		}
		return nil
	} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%s: %w", path, err)
	}
	// The connector creates missing directories: the nearest one that exists must be a
	// writable directory.
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if (errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR)) && filepath.Dir(dir) != dir {
			continue
		}
		if err != nil {
			return fmt.Errorf("directory %s of %s: %w", dir, path, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory (in the path of %s)", dir, path)
		}
		if err := unix.Access(dir, unix.W_OK); err != nil {
			return fmt.Errorf("directory %s of %s is not writable: %w", dir, path, err)
		}
		return nil
	}
}
