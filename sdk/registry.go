package sdk

import (
	"fmt"
	"sort"
)

// SinkFactory makes a new, unopened sink.
type SinkFactory func() Sink

// SourceFactory makes a new, unopened source.
type SourceFactory func() Source

// Registry maps built-in connector names (used as `path = "builtin:NAME"`) to factories.
// It is a value, not a global: a program builds the registry it wants. Not safe for
// concurrent mutation; fill it before use.
type Registry struct {
	sinks   map[string]SinkFactory
	sources map[string]SourceFactory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{sinks: map[string]SinkFactory{}, sources: map[string]SourceFactory{}}
}

// AddSink registers a sink factory under name. It panics on a duplicate name: registries are
// filled by code, and a duplicate is a programming error.
func (r *Registry) AddSink(name string, f SinkFactory) *Registry {
	if _, dup := r.sinks[name]; dup {
		panic(fmt.Sprintf("sdk: sink %q registered twice", name))
	}
	r.sinks[name] = f
	return r
}

// AddSource registers a source factory under name; it panics on a duplicate name.
func (r *Registry) AddSource(name string, f SourceFactory) *Registry {
	if _, dup := r.sources[name]; dup {
		panic(fmt.Sprintf("sdk: source %q registered twice", name))
	}
	r.sources[name] = f
	return r
}

// Sink returns the factory registered under name.
func (r *Registry) Sink(name string) (SinkFactory, bool) { f, ok := r.sinks[name]; return f, ok }

// Source returns the factory registered under name.
func (r *Registry) Source(name string) (SourceFactory, bool) {
	f, ok := r.sources[name]
	return f, ok
}

// SinkNames lists the registered sink names, sorted.
func (r *Registry) SinkNames() []string { return sortedKeys(r.sinks) }

// SourceNames lists the registered source names, sorted.
func (r *Registry) SourceNames() []string { return sortedKeys(r.sources) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
