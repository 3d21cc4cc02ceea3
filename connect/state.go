package connect

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// stateFile is one source's saved state: `<state.path>/source_<key>.state`, opaque bytes,
// as Iggy's runtime keeps it.
//
// save is atomic and durable: the bytes go to `<file>.tmp` (mode 0600, truncated), which is
// fsynced, renamed over the file, and then the directory is fsynced. A crash at any point
// leaves either the old state or the new one, never a mix. A stale `.tmp` left by a crash
// is ignored by load and overwritten by the next save. Not safe for concurrent use: one
// source runner owns its file.
type stateFile struct {
	path string
}

// stateFileName is the file of source key in dir.
func stateFileName(dir, key string) string {
	return filepath.Join(dir, "source_"+key+".state")
}

func newStateFile(dir, key string) *stateFile {
	return &stateFile{path: stateFileName(dir, key)}
}

// EnsureStateDir creates the runtime's state directory (state.path) and its parents when
// missing, owner-only (source states may hold cursors or tokens), as upstream creates it at
// start. Directories below it are never created: see [stateFile.load].
func EnsureStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create state.path: %w", err)
	}
	return nil
}

func (f *stateFile) tmpPath() string { return f.path + ".tmp" }

// Errors of [stateFile.load], with the words of upstream's runtime, which its users match
// on ("Failed to load source state: Cannot open state file"); Ferry's detail follows.
var (
	//lint:ignore ST1005 upstream's words, matched by its users
	errStateOpen = errors.New("Cannot open state file") //nolint:staticcheck // upstream's words
	//lint:ignore ST1005 upstream's words, matched by its users
	errStateRead = errors.New("Cannot read state file") //nolint:staticcheck // upstream's words
)

// load returns the saved state: nil when the file is missing or empty. The runtime creates
// the state directory itself at start (Runtime.Start); a directory missing below it (a key
// such as "a/b" names the file source_a/b.state) is a mistake in the config, not a fresh
// start, so it is an error wrapping errStateOpen, as upstream.
func (f *stateFile) load() ([]byte, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		dir := filepath.Dir(f.path)
		if _, serr := os.Stat(dir); serr != nil {
			return nil, fmt.Errorf("%w %s: its directory %s: %w", errStateOpen, f.path, dir, serr)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errStateRead, f.path, err)
	}
	if len(b) == 0 {
		return nil, nil
	}
	return b, nil
}

// save replaces the state with data, atomically and durably (see stateFile).
func (f *stateFile) save(data []byte) error {
	if err := f.writeTemp(data); err != nil {
		return err
	}
	return f.commit()
}

// writeTemp is save's first phase: the new bytes, fsynced, in the temporary file. A crash
// after it (before commit) leaves the old state in place.
func (f *stateFile) writeTemp(data []byte) (err error) {
	tmp := f.tmpPath()
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	defer func() {
		if cerr := fh.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("write state: close %s: %w", tmp, cerr)
		}
	}()
	if _, err := fh.Write(data); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := fh.Sync(); err != nil {
		return fmt.Errorf("write state: fsync %s: %w", tmp, err)
	}
	return nil
}

// commit is save's second phase: rename the temporary file over the state file and fsync
// the directory so the rename itself survives a crash.
func (f *stateFile) commit() error {
	if err := os.Rename(f.tmpPath(), f.path); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return syncDir(filepath.Dir(f.path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write state: open directory: %w", err)
	}
	err = d.Sync()
	cerr := d.Close()
	if err != nil {
		return fmt.Errorf("write state: fsync directory %s: %w", dir, err)
	}
	if cerr != nil {
		return fmt.Errorf("write state: close directory %s: %w", dir, cerr)
	}
	return nil
}
