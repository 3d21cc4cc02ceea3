package httpapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/ferryio/ferry/connect/config"
)

// memStore is an in-memory ConfigStore over the loaded connector configs (the real
// config.LocalProvider lives in connect/config): each loaded config, plus version+1 of
// each sink as a second version.
type memStore struct {
	mu      sync.Mutex
	sinks   map[string][]*config.Sink
	sources map[string][]*config.Source
	active  map[string]uint64 // "sink/key" → version
}

func newMemStore(c *config.Connectors) *memStore {
	m := &memStore{sinks: map[string][]*config.Sink{}, sources: map[string][]*config.Source{}, active: map[string]uint64{}}
	for _, s := range c.Sinks {
		next := *s
		next.Version++
		next.Name += " v2"
		m.sinks[s.Key] = []*config.Sink{s, &next}
	}
	for _, s := range c.Sources {
		m.sources[s.Key] = []*config.Source{s}
	}
	return m
}

func findVersion[T any](list []*T, version uint64, v func(*T) uint64) (*T, int) {
	for i, c := range list {
		if v(c) == version {
			return c, i
		}
	}
	return nil, -1
}

func sinkVersion(s *config.Sink) uint64     { return s.Version }
func sourceVersion(s *config.Source) uint64 { return s.Version }

func (m *memStore) SinkConfigs(key string) ([]*config.Sink, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sinks[key]), nil
}

func (m *memStore) SinkConfig(key string, version uint64) (*config.Sink, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, _ := findVersion(m.sinks[key], version, sinkVersion); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("sink %s version %d: %w", key, version, errConfigNotFound)
}

// createBody is the part of CreateSinkConfig the store checks.
type createBody struct {
	Enabled *bool   `json:"enabled"`
	Name    *string `json:"name"`
	Path    *string `json:"path"`
}

func (b createBody) check() error {
	switch {
	case b.Enabled == nil:
		return fmt.Errorf("enabled: required: %w", errInvalidConfig)
	case b.Name == nil || *b.Name == "":
		return fmt.Errorf("name: must not be empty: %w", errInvalidConfig)
	case b.Path == nil || *b.Path == "":
		return fmt.Errorf("path: must not be empty: %w", errInvalidConfig)
	}
	return nil
}

func (m *memStore) CreateSink(key string, body []byte) (*config.Sink, error) {
	var b createBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("%w: %w", err, errInvalidConfig)
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.sinks[key]
	c := &config.Sink{}
	if len(list) > 0 {
		*c = *list[len(list)-1]
		c.Version++
	}
	c.Key, c.Enabled, c.Name, c.Path = key, *b.Enabled, *b.Name, *b.Path
	m.sinks[key] = append(list, c)
	return c, nil
}

func (m *memStore) DeleteSinkConfig(key string, version *uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.active["sink/"+key]
	if version != nil {
		v, ok = *version, true
	}
	if !ok {
		return fmt.Errorf("sink %s: no active version: %w", key, errConfigNotFound)
	}
	_, i := findVersion(m.sinks[key], v, sinkVersion)
	if i < 0 {
		return fmt.Errorf("sink %s version %d: %w", key, v, errConfigNotFound)
	}
	m.sinks[key] = slices.Delete(m.sinks[key], i, i+1)
	return nil
}

func (m *memStore) SetActiveSink(key string, version uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, _ := findVersion(m.sinks[key], version, sinkVersion); c == nil {
		return fmt.Errorf("sink %s version %d: %w", key, version, errConfigNotFound)
	}
	m.active["sink/"+key] = version
	return nil
}

func (m *memStore) SourceConfigs(key string) ([]*config.Source, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sources[key]), nil
}

func (m *memStore) SourceConfig(key string, version uint64) (*config.Source, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, _ := findVersion(m.sources[key], version, sourceVersion); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("source %s version %d: %w", key, version, errConfigNotFound)
}

func (m *memStore) CreateSource(key string, body []byte) (*config.Source, error) {
	var b createBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("%w: %w", err, errInvalidConfig)
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.sources[key]
	c := &config.Source{}
	if len(list) > 0 {
		*c = *list[len(list)-1]
		c.Version++
	}
	c.Key, c.Enabled, c.Name, c.Path = key, *b.Enabled, *b.Name, *b.Path
	m.sources[key] = append(list, c)
	return c, nil
}

func (m *memStore) DeleteSourceConfig(key string, version *uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.active["source/"+key]
	if version != nil {
		v, ok = *version, true
	}
	if !ok {
		return fmt.Errorf("source %s: no active version: %w", key, errConfigNotFound)
	}
	_, i := findVersion(m.sources[key], v, sourceVersion)
	if i < 0 {
		return fmt.Errorf("source %s version %d: %w", key, v, errConfigNotFound)
	}
	m.sources[key] = slices.Delete(m.sources[key], i, i+1)
	return nil
}

func (m *memStore) SetActiveSource(key string, version uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, _ := findVersion(m.sources[key], version, sourceVersion); c == nil {
		return fmt.Errorf("source %s version %d: %w", key, version, errConfigNotFound)
	}
	m.active["source/"+key] = version
	return nil
}
