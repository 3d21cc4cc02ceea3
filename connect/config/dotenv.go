package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/joho/godotenv"
)

// EnvPathVar names the .env file to load instead of searching for one.
const EnvPathVar = EnvPrefix + "ENV_PATH"

// DotEnv is what [LoadDotEnv] found: the file, and the variables it adds.
type DotEnv struct {
	Path string   // "" when no file was loaded
	Vars []string // "K=V" entries not already set in the environment, sorted by name
}

// LoadDotEnv finds the .env file as upstream does: the file IGGY_CONNECTORS_ENV_PATH names
// (it must exist and parse: upstream silently loads nothing then, which runs a different
// config than the one written), else the first .env in the working directory or one of its
// parents (none is fine). Variables already set in environ are not overridden. Errors name
// the file.
func LoadDotEnv(environ []string) (DotEnv, error) {
	em := envMap(environ)
	path := em[EnvPathVar]
	if path == "" {
		found, ok := searchUp(".env")
		if !ok {
			return DotEnv{}, nil
		}
		path = found
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && em[EnvPathVar] != "" {
			return DotEnv{}, &Error{File: path, Env: EnvPathVar, Msg: "env file not found", Err: err}
		}
		return DotEnv{}, &Error{File: path, Msg: "cannot read env file", Err: err}
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	vars, err := godotenv.Parse(f)
	if err != nil {
		return DotEnv{}, &Error{File: path, Msg: fmt.Sprintf("cannot parse env file: %v", err)}
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	out := DotEnv{Path: path}
	names := make([]string, 0, len(vars))
	for k := range vars {
		if _, set := em[k]; !set {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		out.Vars = append(out.Vars, k+"="+vars[k])
	}
	return out, nil
}

// Apply sets the variables in the process environment, so plugins and every later
// lookup see them too (upstream's dotenv does the same).
func (d DotEnv) Apply() error {
	for _, kv := range d.Vars {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("%s: set %s: %w", d.Path, k, err)
		}
	}
	return nil
}
