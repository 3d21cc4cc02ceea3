package provider

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/configjson"
)

// Local serves the connector configs of a config_dir for the HTTP API's configs
// routes, as Iggy's local provider does: every version of a key, the active one, new versions
// written as <Dir>/<sink|source>_<key>_<version>.toml, and the pins of .active_versions.toml.
//
// Every call parses the whole directory with the overrides of Env, as [config.LoadConnectors] does.
// A file whose type, key or version cannot be read fails every method with its *config.Error; any
// other invalid file fails the reads of its key only (so a restart of another connector
// goes on) and every write. Writes replace files
// atomically (temporary file, fsync, rename). Its methods are safe for concurrent use; two
// processes writing the same Dir are not coordinated. Do not copy a Local once used.
type Local struct {
	Dir string   // the config_dir
	Env []string // "K=V" entries for the connector overrides (e.g. os.Environ()); nil for none
	// PluginDirs are where a created config's native plugin may lie (the runtime's
	// [config.Runtime.PluginDirs]); nil: [config.DefaultPluginDirs] of Dir. A path outside them is refused
	// with [config.ErrInvalidConfig]; one that names no file yet is accepted (the runtime checks
	// again when it loads it).
	PluginDirs []string

	mu sync.Mutex // serializes writes, so two creates never pick the same version
}

// scan parses every connector file of Dir.
func (p *Local) scan() (*config.DirConfigs, error) { return config.ReadDir(p.Dir, p.Env) }

func (p *Local) activePath() string { return filepath.Join(p.Dir, config.ActiveVersionsFile) }

// SinkConfigs returns every version of sink key found in Dir, enabled or not, sorted by
// version; none is no error.
func (p *Local) SinkConfigs(key string) ([]*config.Sink, error) {
	d, err := p.scan()
	if err != nil {
		return nil, err
	}
	if err := d.KeyErr(config.TypeSink, key); err != nil {
		return nil, err
	}
	return byVersion(d.Sinks(key)), nil
}

// SourceConfigs returns every version of source key; see [Local.SinkConfigs].
func (p *Local) SourceConfigs(key string) ([]*config.Source, error) {
	d, err := p.scan()
	if err != nil {
		return nil, err
	}
	if err := d.KeyErr(config.TypeSource, key); err != nil {
		return nil, err
	}
	return byVersion(d.Sources(key)), nil
}

// SinkConfig returns version of sink key, or an error wrapping [ErrConfigNotFound].
func (p *Local) SinkConfig(key string, version uint64) (*config.Sink, error) {
	d, err := p.scan()
	if err != nil {
		return nil, err
	}
	return lookup(d, d.Sinks(key), p.Dir, config.TypeSink, key, version)
}

// SourceConfig returns version of source key, or an error wrapping [ErrConfigNotFound].
func (p *Local) SourceConfig(key string, version uint64) (*config.Source, error) {
	d, err := p.scan()
	if err != nil {
		return nil, err
	}
	return lookup(d, d.Sources(key), p.Dir, config.TypeSource, key, version)
}

// ActiveSink returns the config of sink key that [config.LoadConnectors] would load: the version
// pinned in .active_versions.toml, else the highest (an unreadable .active_versions.toml is
// ignored, as there). The error wraps [ErrConfigNotFound] when key has no config, or when
// its pinned version has no file.
func (p *Local) ActiveSink(key string) (*config.Sink, error) {
	d, err := p.scan()
	if err != nil {
		return nil, err
	}
	av, _ := config.ReadActiveVersions(p.activePath())
	return active(d, d.Sinks(key), av.Sinks, p.Dir, config.TypeSink, key)
}

// ActiveSource returns the config of source key that [config.LoadConnectors] would load; see
// [Local.ActiveSink].
func (p *Local) ActiveSource(key string) (*config.Source, error) {
	d, err := p.scan()
	if err != nil {
		return nil, err
	}
	av, _ := config.ReadActiveVersions(p.activePath())
	return active(d, d.Sources(key), av.Sources, p.Dir, config.TypeSource, key)
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
// one that Env makes invalid, is an *config.Error with File [configjson.BodyFile] whose Key is the JSON field,
// wrapping [config.ErrInvalidConfig]; a key that cannot be part of a file name (empty, containing a
// path separator or NUL, or starting with '.') wraps config.ErrInvalidConfig as well.
func (p *Local) CreateSink(key string, body []byte) (*config.Sink, error) {
	c, err := p.create(config.TypeSink, key, body)
	if err != nil {
		return nil, err
	}
	return c.(*config.Sink), nil
}

// CreateSource writes a new version of source key from body, the JSON of Iggy's
// CreateSourceConfig (streams of StreamProducerConfig) plus Ferry's optional on_failure,
// retry, dead_letter and restart; see [Local.CreateSink].
func (p *Local) CreateSource(key string, body []byte) (*config.Source, error) {
	c, err := p.create(config.TypeSource, key, body)
	if err != nil {
		return nil, err
	}
	return c.(*config.Source), nil
}

// DeleteSinkConfig deletes version of sink key (every file holding it), or without a version
// the version pinned in .active_versions.toml. A pin on the deleted version is dropped. The
// error wraps [ErrConfigNotFound] when no file holds that version, or when version is nil and
// no version is pinned. An existing .active_versions.toml that does not parse is an error, and
// nothing is deleted.
func (p *Local) DeleteSinkConfig(key string, version *uint64) error {
	return p.deleteConfig(config.TypeSink, key, version)
}

// DeleteSourceConfig deletes a version of source key; see [Local.DeleteSinkConfig].
func (p *Local) DeleteSourceConfig(key string, version *uint64) error {
	return p.deleteConfig(config.TypeSource, key, version)
}

// SetActiveSink pins version of sink key in .active_versions.toml, keeping the other pins. The
// error wraps [ErrConfigNotFound] when no file holds that version. An existing
// .active_versions.toml that does not parse is an error (it is not overwritten).
func (p *Local) SetActiveSink(key string, version uint64) error {
	return p.setActive(config.TypeSink, key, version)
}

// SetActiveSource pins version of source key; see [Local.SetActiveSink].
func (p *Local) SetActiveSource(key string, version uint64) error {
	return p.setActive(config.TypeSource, key, version)
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

func lookup[T any](d *config.DirConfigs, versions map[uint64]T, dir string, typ config.ConnectorType, key string, version uint64) (T, error) {
	c, ok := versions[version]
	if !ok {
		return c, fmt.Errorf("%w: %s %q version %d in %s", ErrConfigNotFound, typ, key, version, dir)
	}
	if err := d.Err(typ, key, version); err != nil {
		var zero T
		return zero, err
	}
	return c, nil
}

func active[T any](d *config.DirConfigs, versions map[uint64]T, pinned map[string]uint64, dir string, typ config.ConnectorType, key string) (T, error) {
	var zero T
	v, ok := config.ActiveVersion(versions, pinned, key)
	if ok {
		if err := d.Err(typ, key, v); err != nil {
			return zero, err
		}
		return versions[v], nil
	}
	if len(versions) == 0 {
		return zero, fmt.Errorf("%w: %s %q in %s", ErrConfigNotFound, typ, key, dir)
	}
	return zero, fmt.Errorf("%w: %s %q: active version %d (%s) has no config file in %s", ErrConfigNotFound, typ, key, v, config.ActiveVersionsFile, dir)
}

// checkKey refuses a key that cannot be part of a file name.
func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: connector key is empty", config.ErrInvalidConfig)
	case strings.HasPrefix(key, "."):
		return fmt.Errorf("%w: connector key %q starts with '.'", config.ErrInvalidConfig, key)
	case strings.ContainsAny(key, "/\\\x00"):
		return fmt.Errorf("%w: connector key %q contains '/', '\\' or NUL", config.ErrInvalidConfig, key)
	}
	return nil
}

func (p *Local) create(typ config.ConnectorType, key string, body []byte) (any, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	d, err := p.scan()
	if err == nil {
		err = d.AnyErr()
	}
	if err != nil {
		return nil, err
	}
	var version uint64
	if vs := d.Versions(typ, key); len(vs) > 0 {
		if vs[len(vs)-1] == math.MaxUint64 {
			return nil, fmt.Errorf("cannot create %s %q: version %d is the last", typ, key, vs[len(vs)-1])
		}
		version = vs[len(vs)-1] + 1
	}
	data, err := configjson.BodyToTOML(typ, key, version, body)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(p.Dir, fmt.Sprintf("%s_%s_%d.toml", typ, key, version))
	c, err := config.ParseConnectorData(path, data, p.Env)
	if err != nil {
		return nil, configjson.AsBodyError(err)
	}
	if err := checkPlugin(c, p.pluginDirs()); err != nil {
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

// pluginDirs are where a created config's native plugin may lie.
func (p *Local) pluginDirs() []string {
	if p.PluginDirs != nil {
		return p.PluginDirs
	}
	return config.DefaultPluginDirs(p.Dir)
}

func (p *Local) deleteConfig(typ config.ConnectorType, key string, version *uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	av, err := config.ReadActiveVersions(p.activePath())
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", p.activePath(), err)
	}
	pins := av.Pins(typ)
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
		err = d.AnyErr()
	}
	if err != nil {
		return err
	}
	files := d.Files(typ, key, v)
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

func (p *Local) setActive(typ config.ConnectorType, key string, version uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, err := p.scan()
	if err == nil {
		err = d.AnyErr()
	}
	if err != nil {
		return err
	}
	if len(d.Files(typ, key, version)) == 0 {
		return fmt.Errorf("%w: %s %q version %d in %s", ErrConfigNotFound, typ, key, version, p.Dir)
	}
	av, err := config.ReadActiveVersions(p.activePath())
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", p.activePath(), err)
	}
	if typ == config.TypeSink {
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

func (p *Local) writeActive(av config.ActiveVersions) error {
	if av.Sinks == nil {
		av.Sinks = map[string]uint64{}
	}
	if av.Sources == nil {
		av.Sources = map[string]uint64{}
	}
	data, err := toml.Marshal(av)
	if err != nil {
		return fmt.Errorf("encode %s: %w", config.ActiveVersionsFile, err)
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

// Scan reads every connector file of Dir for a reload, with [config.ScanConnectors].
func (p *Local) Scan() (*config.Connectors, []config.FileError, error) {
	return config.ScanConnectors(p.Dir, p.Env)
}
