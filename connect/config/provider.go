package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	toml "github.com/pelletier/go-toml/v2"
)

// LocalProvider serves the connector configs of a config_dir for the HTTP API's configs
// routes, as Iggy's local provider does: every version of a key, the active one, new versions
// written as <Dir>/<sink|source>_<key>_<version>.toml, and the pins of .active_versions.toml.
//
// Every call parses the whole directory with the overrides of Env, as [LoadConnectors] does.
// A file whose type, key or version cannot be read fails every method with its *Error; any
// other invalid file fails the reads of its key only (so a restart of another connector
// goes on) and every write. Writes replace files
// atomically (temporary file, fsync, rename). Its methods are safe for concurrent use; two
// processes writing the same Dir are not coordinated. Do not copy a LocalProvider once used.
type LocalProvider struct {
	Dir string   // the config_dir
	Env []string // "K=V" entries for the connector overrides (e.g. os.Environ()); nil for none
	// PluginDirs are where a created config's native plugin may lie (the runtime's
	// [Runtime.PluginDirs]); nil: [DefaultPluginDirs] of Dir. A path outside them is refused
	// with [ErrInvalidConfig]; one that names no file yet is accepted (the runtime checks
	// again when it loads it).
	PluginDirs []string

	mu sync.Mutex // serializes writes, so two creates never pick the same version
}

// scan parses every connector file of Dir.
func (p *LocalProvider) scan() (*dirConfigs, error) {
	files, err := ConnectorFiles(p.Dir)
	if err != nil {
		return nil, err
	}
	return scanDir(files, p.Env)
}

func (p *LocalProvider) activePath() string { return filepath.Join(p.Dir, ActiveVersionsFile) }

// SinkConfigs returns every version of sink key found in Dir, enabled or not, sorted by
// version; none is no error.
func (p *LocalProvider) SinkConfigs(key string) ([]*Sink, error) {
	d, err := p.scan()
	if err != nil {
		return nil, err
	}
	if err := d.keyErr(TypeSink, key); err != nil {
		return nil, err
	}
	return byVersion(d.sinks[key]), nil
}

// SourceConfigs returns every version of source key; see [LocalProvider.SinkConfigs].
func (p *LocalProvider) SourceConfigs(key string) ([]*Source, error) {
	d, err := p.scan()
	if err != nil {
		return nil, err
	}
	if err := d.keyErr(TypeSource, key); err != nil {
		return nil, err
	}
	return byVersion(d.sources[key]), nil
}

// SinkConfig returns version of sink key, or an error wrapping [ErrConfigNotFound].
func (p *LocalProvider) SinkConfig(key string, version uint64) (*Sink, error) {
	d, err := p.scan()
	if err != nil {
		return nil, err
	}
	return lookup(d, d.sinks[key], p.Dir, TypeSink, key, version)
}

// SourceConfig returns version of source key, or an error wrapping [ErrConfigNotFound].
func (p *LocalProvider) SourceConfig(key string, version uint64) (*Source, error) {
	d, err := p.scan()
	if err != nil {
		return nil, err
	}
	return lookup(d, d.sources[key], p.Dir, TypeSource, key, version)
}

// ActiveSink returns the config of sink key that [LoadConnectors] would load: the version
// pinned in .active_versions.toml, else the highest (an unreadable .active_versions.toml is
// ignored, as there). The error wraps [ErrConfigNotFound] when key has no config, or when
// its pinned version has no file.
func (p *LocalProvider) ActiveSink(key string) (*Sink, error) {
	d, err := p.scan()
	if err != nil {
		return nil, err
	}
	av, _ := readActiveVersions(p.activePath())
	return active(d, d.sinks[key], av.Sinks, p.Dir, TypeSink, key)
}

// ActiveSource returns the config of source key that [LoadConnectors] would load; see
// [LocalProvider.ActiveSink].
func (p *LocalProvider) ActiveSource(key string) (*Source, error) {
	d, err := p.scan()
	if err != nil {
		return nil, err
	}
	av, _ := readActiveVersions(p.activePath())
	return active(d, d.sources[key], av.Sources, p.Dir, TypeSource, key)
}

// CreateSink writes a new version of sink key from body, the JSON of Iggy's CreateSinkConfig
// (enabled, name, path and streams required; transforms, plugin_config_format, plugin_config,
// verbose and benchmark optional) plus Ferry's optional offset_commit, on_failure, retry,
// dead_letter, commit, shutdown_timeout and restart (durations as strings, e.g. "5ms"); the
// form [SinkJSON] produces is accepted. A null is taken as an absent key; other keys are
// ignored. The new version is the highest of key plus one, or 0; the file is
// <Dir>/sink_<key>_<version>.toml, holding the keys given. It does not pin the version.
//
// It returns the new config as read back from the file with Env. Errors: an invalid body, or
// one that Env makes invalid, is an *Error with File [BodyFile] whose Key is the JSON field,
// wrapping [ErrInvalidConfig]; a key that cannot be part of a file name (empty, containing a
// path separator or NUL, or starting with '.') wraps ErrInvalidConfig as well.
func (p *LocalProvider) CreateSink(key string, body []byte) (*Sink, error) {
	c, err := p.create(TypeSink, key, body)
	if err != nil {
		return nil, err
	}
	return c.(*Sink), nil
}

// CreateSource writes a new version of source key from body, the JSON of Iggy's
// CreateSourceConfig (streams of StreamProducerConfig) plus Ferry's optional on_failure,
// retry, dead_letter and restart; see [LocalProvider.CreateSink].
func (p *LocalProvider) CreateSource(key string, body []byte) (*Source, error) {
	c, err := p.create(TypeSource, key, body)
	if err != nil {
		return nil, err
	}
	return c.(*Source), nil
}

// DeleteSinkConfig deletes version of sink key (every file holding it), or without a version
// the version pinned in .active_versions.toml. A pin on the deleted version is dropped. The
// error wraps [ErrConfigNotFound] when no file holds that version, or when version is nil and
// no version is pinned. An existing .active_versions.toml that does not parse is an error, and
// nothing is deleted.
func (p *LocalProvider) DeleteSinkConfig(key string, version *uint64) error {
	return p.deleteConfig(TypeSink, key, version)
}

// DeleteSourceConfig deletes a version of source key; see [LocalProvider.DeleteSinkConfig].
func (p *LocalProvider) DeleteSourceConfig(key string, version *uint64) error {
	return p.deleteConfig(TypeSource, key, version)
}

// SetActiveSink pins version of sink key in .active_versions.toml, keeping the other pins. The
// error wraps [ErrConfigNotFound] when no file holds that version. An existing
// .active_versions.toml that does not parse is an error (it is not overwritten).
func (p *LocalProvider) SetActiveSink(key string, version uint64) error {
	return p.setActive(TypeSink, key, version)
}

// SetActiveSource pins version of source key; see [LocalProvider.SetActiveSink].
func (p *LocalProvider) SetActiveSource(key string, version uint64) error {
	return p.setActive(TypeSource, key, version)
}

func byVersion[T any](versions map[uint64]T) []T {
	vs := make([]uint64, 0, len(versions))
	for v := range versions {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	out := make([]T, 0, len(vs))
	for _, v := range vs {
		out = append(out, versions[v])
	}
	return out
}

func lookup[T any](d *dirConfigs, versions map[uint64]T, dir string, typ ConnectorType, key string, version uint64) (T, error) {
	c, ok := versions[version]
	if !ok {
		return c, fmt.Errorf("%w: %s %q version %d in %s", ErrConfigNotFound, typ, key, version, dir)
	}
	if err := d.errOf(typ, key, version); err != nil {
		var zero T
		return zero, err
	}
	return c, nil
}

func active[T any](d *dirConfigs, versions map[uint64]T, pinned map[string]uint64, dir string, typ ConnectorType, key string) (T, error) {
	var zero T
	v, ok := activeVersion(versions, pinned, key)
	if ok {
		if err := d.errOf(typ, key, v); err != nil {
			return zero, err
		}
		return versions[v], nil
	}
	if len(versions) == 0 {
		return zero, fmt.Errorf("%w: %s %q in %s", ErrConfigNotFound, typ, key, dir)
	}
	return zero, fmt.Errorf("%w: %s %q: active version %d (%s) has no config file in %s", ErrConfigNotFound, typ, key, v, ActiveVersionsFile, dir)
}

// anyErr returns the error of the first file, by type, key and version, that does not load.
// Writes refuse to go on while one is there: a write decides from every version of a key
// and from the pins, so it must see every file.
func (d *dirConfigs) anyErr() error {
	ids := slices.SortedFunc(maps.Keys(d.invalid), func(a, b connID) int {
		return cmp.Or(cmp.Compare(a.typ, b.typ), cmp.Compare(a.key, b.key), cmp.Compare(a.version, b.version))
	})
	if len(ids) > 0 {
		return d.invalid[ids[0]].Err
	}
	return nil
}

// keyErr returns the error of the first version of (typ, key) whose file does not load.
func (d *dirConfigs) keyErr(typ ConnectorType, key string) error {
	for _, v := range d.versions(typ, key) {
		if err := d.errOf(typ, key, v); err != nil {
			return err
		}
	}
	return nil
}

// checkKey refuses a key that cannot be part of a file name.
func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: connector key is empty", ErrInvalidConfig)
	case strings.HasPrefix(key, "."):
		return fmt.Errorf("%w: connector key %q starts with '.'", ErrInvalidConfig, key)
	case strings.ContainsAny(key, "/\\\x00"):
		return fmt.Errorf("%w: connector key %q contains '/', '\\' or NUL", ErrInvalidConfig, key)
	}
	return nil
}

func (p *LocalProvider) create(typ ConnectorType, key string, body []byte) (any, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	d, err := p.scan()
	if err == nil {
		err = d.anyErr()
	}
	if err != nil {
		return nil, err
	}
	var version uint64
	if vs := d.versions(typ, key); len(vs) > 0 {
		if vs[len(vs)-1] == math.MaxUint64 {
			return nil, fmt.Errorf("cannot create %s %q: version %d is the last", typ, key, vs[len(vs)-1])
		}
		version = vs[len(vs)-1] + 1
	}
	data, err := bodyToTOML(typ, key, version, body)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(p.Dir, fmt.Sprintf("%s_%s_%d.toml", typ, key, version))
	c, err := parseConnectorData(path, data, p.Env)
	if err != nil {
		return nil, asBodyError(err)
	}
	if err := p.checkPlugin(c); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("cannot create %s version %d of %q: %s exists and holds another config", typ, version, key, path)
	}
	if err := writeFileAtomic(path, data); err != nil {
		return nil, err
	}
	return c, nil
}

// checkPlugin refuses a new config whose native plugin lies outside the plugin
// directories, so the API never stores a path the runtime would refuse to load.
func (p *LocalProvider) checkPlugin(c any) error {
	var common *Common
	switch c := c.(type) {
	case *Sink:
		common = &c.Common
	case *Source:
		common = &c.Common
	default:
		return nil
	}
	if _, ok := common.Builtin(); ok {
		return nil
	}
	dirs := p.PluginDirs
	if dirs == nil {
		dirs = DefaultPluginDirs(p.Dir)
	}
	if _, err := LoadablePluginPath(common.Path, dirs); errors.Is(err, ErrPluginNotAllowed) {
		return &Error{File: BodyFile, Key: "path", Msg: err.Error(), Err: ErrInvalidConfig}
	}
	return nil
}

func (p *LocalProvider) deleteConfig(typ ConnectorType, key string, version *uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	av, err := readActiveVersions(p.activePath())
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", p.activePath(), err)
	}
	pins := av.pins(typ)
	var v uint64
	if version != nil {
		v = *version
	} else if pinned, ok := pins[key]; ok {
		v = pinned
	} else {
		return fmt.Errorf("%w: %s %q has no active version in %s", ErrConfigNotFound, typ, key, p.activePath())
	}
	d, err := p.scan()
	if err == nil {
		err = d.anyErr()
	}
	if err != nil {
		return err
	}
	files := d.files[connID{typ, key, v}]
	if len(files) == 0 {
		return fmt.Errorf("%w: %s %q version %d in %s", ErrConfigNotFound, typ, key, v, p.Dir)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete %s %q version %d: %w", typ, key, v, err)
		}
	}
	if err := syncDir(p.Dir); err != nil {
		return err
	}
	if pinned, ok := pins[key]; ok && pinned == v {
		delete(pins, key)
		return p.writeActive(av)
	}
	return nil
}

func (p *LocalProvider) setActive(typ ConnectorType, key string, version uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, err := p.scan()
	if err == nil {
		err = d.anyErr()
	}
	if err != nil {
		return err
	}
	if len(d.files[connID{typ, key, version}]) == 0 {
		return fmt.Errorf("%w: %s %q version %d in %s", ErrConfigNotFound, typ, key, version, p.Dir)
	}
	av, err := readActiveVersions(p.activePath())
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", p.activePath(), err)
	}
	if typ == TypeSink {
		if av.Sinks == nil {
			av.Sinks = map[string]uint64{}
		}
		av.Sinks[key] = version
	} else {
		if av.Sources == nil {
			av.Sources = map[string]uint64{}
		}
		av.Sources[key] = version
	}
	return p.writeActive(av)
}

// pins returns the pins of typ (possibly nil).
func (av *ActiveVersions) pins(typ ConnectorType) map[string]uint64 {
	if typ == TypeSink {
		return av.Sinks
	}
	return av.Sources
}

func (p *LocalProvider) writeActive(av ActiveVersions) error {
	if av.Sinks == nil {
		av.Sinks = map[string]uint64{}
	}
	if av.Sources == nil {
		av.Sources = map[string]uint64{}
	}
	data, err := toml.Marshal(av)
	if err != nil {
		return fmt.Errorf("encode %s: %w", ActiveVersionsFile, err)
	}
	return writeFileAtomic(p.activePath(), data)
}

// writeFileAtomic replaces path with data: a hidden temporary file in the same directory
// (which connector discovery skips) is written, synced and renamed over path, then the
// directory is synced.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	name := tmp.Name()
	fail := func(err error) error {
		_ = tmp.Close()
		_ = os.Remove(name)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
