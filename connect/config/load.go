package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
	// Invalid lists the connectors whose active config file does not load, sorted by type
	// and key: the runtime shows each in error and runs the others; `ferry check` fails.
	Invalid []*Invalid
	// Warnings lists what was skipped: unreadable .active_versions.toml, pinned versions with
	// no file, invalid files of versions that are not active, ignored environment variables.
	Warnings []string
}

// Invalid is a connector whose active config file names it (type, key, version) but does
// not load: an invalid value, a missing or unknown key, a bad environment override, a
// second file for the same version. Err is the *Error naming the file, line and key.
type Invalid struct {
	Type    ConnectorType
	Key     string
	Version uint64
	File    string
	Enabled bool   // false only when the file says enabled = false
	Name    string // name and path as the file gives them, "" when not strings
	Path    string
	Err     error
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
// no file is left out (with a warning; upstream is silent).
//
// A file that cannot be read, or whose type, key or version cannot be read (a TOML syntax
// error among them), fails the whole load, as upstream, with an *Error naming the file and
// line: it cannot be told which connector it is. Any other mistake is that connector's: when
// its version is the active one the connector is listed in Invalid (the runtime isolates it),
// else it is a warning. Two files with the same (type, key, version) make that version
// invalid, naming both (upstream: the last one read wins, silently).
func LoadConnectors(dir string, env []string) (*Connectors, error) {
	files, err := ConnectorFiles(dir)
	if err != nil {
		return nil, err
	}
	out := &Connectors{}
	active, err := ReadActiveVersions(filepath.Join(dir, ActiveVersionsFile))
	if err != nil {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s ignored: %v", ActiveVersionsFile, err))
	}
	d, err := scanDir(files, env)
	if err != nil {
		return nil, err
	}
	out.Warnings = append(out.Warnings, d.warnings...)
	var inv []*Invalid
	out.Sinks, inv, out.Warnings = pickActive(d, d.sinks, active.Sinks, TypeSink, out.Warnings)
	out.Invalid = append(out.Invalid, inv...)
	out.Sources, inv, out.Warnings = pickActive(d, d.sources, active.Sources, TypeSource, out.Warnings)
	out.Invalid = append(out.Invalid, inv...)
	return out, nil
}

// connID names one connector config: a (type, key, version).
type connID struct {
	typ     ConnectorType
	key     string
	version uint64
}

// DirConfigs is every connector config of a config_dir, by key and version ([ReadDir]). A
// version whose file does not load is in the maps with a nil config and its error in invalid.
type DirConfigs struct {
	sinks    map[string]map[uint64]*Sink
	sources  map[string]map[uint64]*Source
	invalid  map[connID]*Invalid
	files    map[connID][]string // the names of the file holding each config (two only for a symlink and its target)
	warnings []string            // ignored environment variables
}

// scanDir parses files (from [ConnectorFiles]) with the overrides of env. A file whose header
// (type, key, version) cannot be read fails the scan; any other error is recorded against
// that version (invalid), and so is a second file for the same (type, key, version).
func scanDir(files, env []string) (*DirConfigs, error) {
	d := &DirConfigs{sinks: map[string]map[uint64]*Sink{}, sources: map[string]map[uint64]*Source{},
		invalid: map[connID]*Invalid{}, files: map[connID][]string{}}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, &Error{File: f, Msg: "cannot read connector file", Err: err}
		}
		h, idx, err := readHeader(f, data)
		if err != nil {
			return nil, err
		}
		id := connID{h.Type, h.Key, h.Version}
		c, err := parseBody(f, data, env, h, idx)
		if err == nil {
			err = d.add(id, f)
		} else {
			d.files[id] = append(d.files[id], f)
		}
		if err != nil {
			if d.invalid[id] == nil {
				d.invalid[id] = &Invalid{Type: h.Type, Key: h.Key, Version: h.Version, File: f, Enabled: h.Enabled,
					Name: h.Name, Path: h.Path, Err: err}
			}
			c = nil
		}
		switch h.Type {
		case TypeSink:
			s, _ := c.(*Sink)
			if s != nil {
				d.warnings = append(d.warnings, s.Warnings...)
			}
			if d.sinks[h.Key] == nil {
				d.sinks[h.Key] = map[uint64]*Sink{}
			}
			if d.invalid[id] != nil {
				s = nil
			}
			d.sinks[h.Key][h.Version] = s
		case TypeSource:
			s, _ := c.(*Source)
			if s != nil {
				d.warnings = append(d.warnings, s.Warnings...)
			}
			if d.sources[h.Key] == nil {
				d.sources[h.Key] = map[uint64]*Source{}
			}
			if d.invalid[id] != nil {
				s = nil
			}
			d.sources[h.Key][h.Version] = s
		}
	}
	return d, nil
}

// add records that file holds id; a second file for the same id is an error naming both.
// The same file reached twice (a symlink beside its target) is one config, listed twice so
// that a delete removes both names.
func (d *DirConfigs) add(id connID, file string) error {
	prev := d.files[id]
	d.files[id] = append(d.files[id], file)
	if len(prev) > 0 && !sameFile(prev[0], file) {
		return &Error{File: file, Key: "key", Msg: fmt.Sprintf("%s %q version %d is also defined in %s; remove one of the two files or change its version",
			id.typ, id.key, id.version, prev[0])}
	}
	return nil
}

// AnyErr returns the error of the first file, by type, key and version, that does not load
// (a provider that writes refuses to go on while one is there: a write decides from every
// version of a key and from the pins, so it must see every file).
func (d *DirConfigs) AnyErr() error {
	ids := slices.SortedFunc(maps.Keys(d.invalid), func(a, b connID) int {
		return cmp.Or(cmp.Compare(a.typ, b.typ), cmp.Compare(a.key, b.key), cmp.Compare(a.version, b.version))
	})
	if len(ids) > 0 {
		return d.invalid[ids[0]].Err
	}
	return nil
}

// KeyErr returns the error of the first version of (typ, key) whose file does not load.
func (d *DirConfigs) KeyErr(typ ConnectorType, key string) error {
	for _, v := range d.Versions(typ, key) {
		if err := d.Err(typ, key, v); err != nil {
			return err
		}
	}
	return nil
}

// Pins returns the pins of typ (possibly nil).
func (av *ActiveVersions) Pins(typ ConnectorType) map[string]uint64 {
	if typ == TypeSink {
		return av.Sinks
	}
	return av.Sources
}

// ReadDir parses every connector file of dir (see [ConnectorFiles]) with the overrides of
// env: every version of every key, loaded or not. A file whose type, key or version cannot
// be read fails it with its *Error. It is what a provider that serves and writes versions
// reads (connect/provider.Local); [LoadConnectors] picks the active versions from the same.
func ReadDir(dir string, env []string) (*DirConfigs, error) {
	files, err := ConnectorFiles(dir)
	if err != nil {
		return nil, err
	}
	return scanDir(files, env)
}

// Sinks returns every version of sink key; a version whose file does not load maps to nil.
func (d *DirConfigs) Sinks(key string) map[uint64]*Sink { return d.sinks[key] }

// Sources returns every version of source key; see [DirConfigs.Sinks].
func (d *DirConfigs) Sources(key string) map[uint64]*Source { return d.sources[key] }

// Files returns the files holding version v of (typ, key): none when there is no such
// version, two for a symlink beside its target.
func (d *DirConfigs) Files(typ ConnectorType, key string, v uint64) []string {
	return d.files[connID{typ, key, v}]
}

// Err returns the error of version v of (typ, key), nil when it loaded.
func (d *DirConfigs) Err(typ ConnectorType, key string, v uint64) error {
	if inv := d.invalid[connID{typ, key, v}]; inv != nil {
		return inv.Err
	}
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
func (d *DirConfigs) Versions(typ ConnectorType, key string) []uint64 {
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
func ActiveVersion[T any](versions map[uint64]T, pinned map[string]uint64, key string) (v uint64, ok bool) {
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

// pickActive chooses the active version of every key of byKey (see [activeVersion]): a valid
// one is returned, an invalid one listed as Invalid; the invalid files of versions that are
// not active become warnings.
func pickActive[T comparable](d *DirConfigs, byKey map[string]map[uint64]T, pinned map[string]uint64, kind ConnectorType, warnings []string) ([]T, []*Invalid, []string) {
	var out []T
	var invalid []*Invalid
	var zero T
	for _, key := range sortedKeys(byKey) {
		versions := byKey[key]
		v, ok := ActiveVersion(versions, pinned, key)
		for _, ver := range slices.Sorted(maps.Keys(versions)) {
			if inv := d.invalid[connID{kind, key, ver}]; inv != nil && (!ok || ver != v) {
				warnings = append(warnings, fmt.Sprintf("%s %s version %d ignored (not the active version): %v", kind, key, ver, inv.Err))
			}
		}
		switch {
		case !ok:
			warnings = append(warnings, fmt.Sprintf("%s %s not loaded: active version %d has no config file", kind, key, v))
		case versions[v] == zero:
			invalid = append(invalid, d.invalid[connID{kind, key, v}])
		default:
			out = append(out, versions[v])
		}
	}
	return out, invalid, warnings
}

// ReadActiveVersions returns the pinned versions; a missing file is no error.
func ReadActiveVersions(path string) (ActiveVersions, error) {
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
