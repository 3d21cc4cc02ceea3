package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// ActiveVersionsFile in a config_dir pins the version used per key: tables [sinks] and
// [sources] of `key = version`.
const ActiveVersionsFile = ".active_versions.toml"

// Connectors is the active configuration of every connector in a config_dir.
type Connectors struct {
	Sinks   []*Sink   // sorted by key; disabled ones included (Enabled = false)
	Sources []*Source // sorted by key
	// Warnings lists what was skipped: unreadable .active_versions.toml, pinned versions with
	// no file, ignored environment variables.
	Warnings []string
}

// Sink returns the sink with key, or nil.
func (c *Connectors) Sink(key string) *Sink {
	for _, s := range c.Sinks {
		if s.Key == key {
			return s
		}
	}
	return nil
}

// Source returns the source with key, or nil.
func (c *Connectors) Source(key string) *Source {
	for _, s := range c.Sources {
		if s.Key == key {
			return s
		}
	}
	return nil
}

// ConnectorFiles lists the connector files of dir as upstream discovers them: regular files
// (symlinks followed) directly in dir whose extension is exactly ".toml", except hidden files
// and Cargo.toml (any case). Sorted by name. A missing dir is an error wrapping
// [ErrConfigDirMissing]: `ferry run` creates it first with [EnsureConfigDir], `ferry check`
// reports it.
func ConnectorFiles(dir string) ([]string, error) {
	if dir == "" {
		return nil, errors.New("config_dir is empty")
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("connectors.config_dir %s: %w", dir, ErrConfigDirMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("read config_dir: %w", err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || filepath.Ext(name) != ".toml" || strings.EqualFold(name, "Cargo.toml") {
			continue
		}
		p := filepath.Join(dir, name)
		st, err := os.Stat(p) // follows symlinks
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// ErrConfigDirMissing is wrapped when connectors.config_dir does not exist.
var ErrConfigDirMissing = errors.New("does not exist")

// EnsureConfigDir creates a missing config_dir (empty: no connector runs until one is
// added through the API or a file), as upstream's runtime does at start.
func EnsureConfigDir(dir string) error {
	if dir == "" {
		return errors.New("config_dir is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create connectors.config_dir: %w", err)
	}
	return nil
}

// ActiveVersions is the content of .active_versions.toml.
type ActiveVersions struct {
	Sinks   map[string]uint64 `toml:"sinks"`
	Sources map[string]uint64 `toml:"sources"`
}

// LoadConnectors reads every connector file of dir with the environment overrides of env
// ("K=V" entries, e.g. os.Environ(); nil for none) and keeps one config per key: the version
// pinned in .active_versions.toml, else the highest version. A key whose pinned version has
// no file is left out (with a warning; upstream is silent). Two files with the same (type,
// key, version) are an error naming both (upstream: the last one read wins, silently). Any
// file that fails to parse fails the whole load, as upstream, with an *Error naming the
// file, key and line.
func LoadConnectors(dir string, env []string) (*Connectors, error) {
	files, err := ConnectorFiles(dir)
	if err != nil {
		return nil, err
	}
	out := &Connectors{}
	active, err := readActiveVersions(filepath.Join(dir, ActiveVersionsFile))
	if err != nil {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s ignored: %v", ActiveVersionsFile, err))
	}
	d, err := scanDir(files, env)
	if err != nil {
		return nil, err
	}
	out.Warnings = append(out.Warnings, d.warnings...)
	out.Sinks, out.Warnings = pickActive(d.sinks, active.Sinks, TypeSink, out.Warnings)
	out.Sources, out.Warnings = pickActive(d.sources, active.Sources, TypeSource, out.Warnings)
	return out, nil
}

// connID names one connector config: a (type, key, version).
type connID struct {
	typ     ConnectorType
	key     string
	version uint64
}

// dirConfigs is every connector config of a config_dir, by key and version.
type dirConfigs struct {
	sinks    map[string]map[uint64]*Sink
	sources  map[string]map[uint64]*Source
	files    map[connID][]string // the names of the file holding each config (two only for a symlink and its target)
	warnings []string            // ignored environment variables
}

// scanDir parses files (from [ConnectorFiles]) with the overrides of env. Any file that
// fails to parse fails the scan, and so does a second file for the same (type, key, version).
func scanDir(files, env []string) (*dirConfigs, error) {
	d := &dirConfigs{sinks: map[string]map[uint64]*Sink{}, sources: map[string]map[uint64]*Source{}, files: map[connID][]string{}}
	for _, f := range files {
		c, err := parseConnectorFile(f, env)
		if err != nil {
			return nil, err
		}
		switch c := c.(type) {
		case *Sink:
			d.warnings = append(d.warnings, c.Warnings...)
			if d.sinks[c.Key] == nil {
				d.sinks[c.Key] = map[uint64]*Sink{}
			}
			d.sinks[c.Key][c.Version] = c
			id := connID{TypeSink, c.Key, c.Version}
			if err := d.add(id, f); err != nil {
				return nil, err
			}
		case *Source:
			d.warnings = append(d.warnings, c.Warnings...)
			if d.sources[c.Key] == nil {
				d.sources[c.Key] = map[uint64]*Source{}
			}
			d.sources[c.Key][c.Version] = c
			id := connID{TypeSource, c.Key, c.Version}
			if err := d.add(id, f); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

// add records that file holds id; a second file for the same id is an error naming both.
// The same file reached twice (a symlink beside its target) is one config, listed twice so
// that a delete removes both names.
func (d *dirConfigs) add(id connID, file string) error {
	if prev := d.files[id]; len(prev) > 0 && !sameFile(prev[0], file) {
		return &Error{File: file, Key: "key", Msg: fmt.Sprintf("%s %q version %d is also defined in %s; remove one of the two files or change its version",
			id.typ, id.key, id.version, prev[0])}
	}
	d.files[id] = append(d.files[id], file)
	return nil
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// versions returns the versions of (typ, key) in ascending order.
func (d *dirConfigs) versions(typ ConnectorType, key string) []uint64 {
	var vs []uint64
	for id := range d.files {
		if id.typ == typ && id.key == key {
			vs = append(vs, id.version)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	return vs
}

// activeVersion is the choice LoadConnectors makes for one key: the version pinned for it,
// else the highest in versions. ok is false when the key has no config, or when its pinned
// version has none (v is then that pinned version).
func activeVersion[T any](versions map[uint64]T, pinned map[string]uint64, key string) (v uint64, ok bool) {
	if v, ok := pinned[key]; ok {
		_, has := versions[v]
		return v, has
	}
	if len(versions) == 0 {
		return 0, false
	}
	for ver := range versions {
		v = max(v, ver)
	}
	return v, true
}

func pickActive[T any](byKey map[string]map[uint64]T, pinned map[string]uint64, kind ConnectorType, warnings []string) ([]T, []string) {
	var out []T
	for _, key := range sortedKeys(byKey) {
		versions := byKey[key]
		v, ok := activeVersion(versions, pinned, key)
		if !ok {
			warnings = append(warnings, fmt.Sprintf("%s %s not loaded: active version %d has no config file", kind, key, v))
			continue
		}
		out = append(out, versions[v])
	}
	return out, warnings
}

// readActiveVersions returns the pinned versions; a missing file is no error.
func readActiveVersions(path string) (ActiveVersions, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ActiveVersions{}, nil
	}
	if err != nil {
		return ActiveVersions{}, err
	}
	var av ActiveVersions
	if err := toml.Unmarshal(data, &av); err != nil {
		return ActiveVersions{}, tomlError(path, &docIndex{}, err)
	}
	return av, nil
}
