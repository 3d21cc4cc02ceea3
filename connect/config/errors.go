package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// ErrPluginNotFound is wrapped by [ResolvePluginPath] when no file matches a plugin path.
// Its words are upstream's, capital letter included: tools written for Iggy's runtime look
// for "Plugin library not found" in a connector's last_error.
//
//lint:ignore ST1005 upstream's words, matched by its users
var ErrPluginNotFound = errors.New("Plugin library not found") //nolint:staticcheck // upstream's words

// ErrPluginNotAllowed is wrapped by [LoadablePluginPath] when a plugin library lies outside
// every directory of [plugins] directories: it is never opened.
var ErrPluginNotAllowed = errors.New("plugin library not in an allowed directory")

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
		if b.Len() > 0 {
			b.WriteString(": ")
		}
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

// goTableRE matches the Go struct types behind TOML tables in go-toml's messages.
var goTableRE = regexp.MustCompile(`into (config\.raw\w+|struct \{.*\})$`)

// goScalarRE matches go-toml's "cannot decode TOML string into uint32" once the Go types are
// replaced: the message then says which TOML value was wanted, in the file's words.
var goScalarRE = regexp.MustCompile(`^cannot decode TOML (\w+) into (\w+)$`)

// tomlKinds names, per Go scalar type a config field has, the TOML value it takes.
var tomlKinds = map[string]string{
	"int": "an integer", "int8": "an integer", "int16": "an integer", "int32": "an integer", "int64": "an integer",
	"uint": "an integer", "uint8": "an integer", "uint16": "an integer", "uint32": "an integer", "uint64": "an integer",
	"float32": "a number", "float64": "a number", "bool": "a boolean (true or false)", "string": "a string",
}

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
		msg = goTableRE.ReplaceAllString(msg, "into a table")
		if m := goScalarRE.FindStringSubmatch(msg); m != nil && tomlKinds[m[2]] != "" {
			msg = fmt.Sprintf("expected %s, got %s", tomlKinds[m[2]], m[1])
		}
		return &Error{File: file, Line: line, Key: idx.keyAt(line, de.Key()), Msg: msg}
	}
	return &Error{File: file, Msg: err.Error(), Err: err}
}

// ErrInvalidConfig is wrapped by the config providers' creates (connect/provider) and by
// connect/configjson when a request body is not a valid connector config (the *Error then names the JSON field
// as its Key), by a key that cannot be part of a file name, and by [RenderPluginConfig] for an
// unknown format or a plugin_config the format cannot hold.
var ErrInvalidConfig = errors.New("invalid connector config")

// ErrNoPluginConfig is returned by [RenderPluginConfig] when the connector has no
// plugin_config.
var ErrNoPluginConfig = errors.New("connector has no plugin_config")
