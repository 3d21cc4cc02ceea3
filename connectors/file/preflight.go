package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/ferryio/ferry/sdk"
)

var _ sdk.Preflighter = (*Sink)(nil)

// Preflight implements sdk.Preflighter (`ferry check --connect`): the file can be appended
// to, as Open will: it exists and is writable, or the nearest directory above it that
// exists lets Open create it (and the directories missing in between). Writability is
// asked of the kernel (access(2): the mode bits, ACLs and a read-only mount). Nothing is
// created.
func (s *Sink) Preflight(_ context.Context, raw []byte) []error {
	cfg, err := Config.Parse(raw)
	if err != nil {
		return []error{err}
	}
	if err := writable(cfg.Path); err != nil {
		return []error{err}
	}
	return nil
}

// writable is Preflight's check of one path, as an error naming the key and the fix.
func writable(path string) error {
	problem := func(format string, a ...any) error {
		return &sdk.FieldError{Field: "path", Msg: fmt.Sprintf(format, a...)}
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return problem("%s is a directory; fix: name a file in it, e.g. %s", path, filepath.Join(path, "out.jsonl"))
	case err == nil:
		if err := syscall.Access(path, 2 /* W_OK */); err != nil {
			return problem("%s cannot be written: %v; fix: make it writable for the user ferry runs as, or choose another path", path, err)
		}
		return nil
	case !absent(err):
		return problem("%s: %v", path, err)
	}
	dir := filepath.Dir(path)
	for {
		st, err := os.Stat(dir)
		if err == nil && !st.IsDir() {
			return problem("%s is not a directory (in the path of %s); fix: choose another path", dir, path)
		}
		if err == nil {
			break
		}
		if !absent(err) || filepath.Dir(dir) == dir {
			return problem("%s: %v", dir, err)
		}
		dir = filepath.Dir(dir)
	}
	if err := syscall.Access(dir, 2|1 /* W_OK|X_OK */); err != nil {
		return problem("%s cannot be created: its directory %s is not writable: %v; fix: make %s writable for the user ferry runs as, or choose another path", path, dir, err, dir)
	}
	return nil
}

// absent says a stat's error means the path is not there: it does not exist, or a file
// stands where one of its directories would.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
