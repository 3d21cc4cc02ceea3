package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// ErrPluginNotFound is wrapped by [ResolvePluginPath] when no file matches a plugin path.
var ErrPluginNotFound = errors.New("plugin library not found")

// ErrNotSupported is wrapped by errors about configuration Ferry parses but cannot run yet
// (connectors.config_type = "http").
var ErrNotSupported = errors.New("not supported")

// Error is a problem with one key of one configuration file.
type Error struct {
	File string // the file, as given to the parser
	Line int    // 1-based line; 0 when the value came from an environment variable or is unknown
	Key  string // dotted path with array indices, e.g. "streams[0].batch_length"; "" for the whole file
	Env  string // the environment variable that set the value, if any
	Msg  string // what is wrong; never contains a secret value
	Err  error  // the cause, if any (may be nil)
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": ")
		b.WriteString(e.Key)
	}
	if e.Env != "" {
		fmt.Fprintf(&b, " (from %s)", e.Env)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// goTypeRE matches go-toml's "struct field pkg.T.F of type X" so the message names the TOML
// type wanted instead of Ferry's internal Go types.
var goTypeRE = regexp.MustCompile(`into struct field \S+ of type (\S+)`)

// tomlError turns a go-toml error into an *Error with the exact key path from idx.
func tomlError(file string, idx *docIndex, err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) && len(sm.Errors) > 0 {
		de := &sm.Errors[0]
		line, _ := de.Position()
		return &Error{File: file, Line: line, Key: idx.keyAt(line, de.Key()), Msg: "unknown key"}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		msg = goTypeRE.ReplaceAllString(msg, "into $1")
		return &Error{File: file, Line: line, Key: idx.keyAt(line, de.Key()), Msg: msg}
	}
	return &Error{File: file, Msg: err.Error(), Err: err}
}
