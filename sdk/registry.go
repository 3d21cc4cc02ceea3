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
	specs   map[string]ConfigSpec // "sink/NAME", "source/NAME"
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{sinks: map[string]SinkFactory{}, sources: map[string]SourceFactory{}, specs: map[string]ConfigSpec{}}
}

// AddSink registers a sink factory under name, with the spec of its plugin_config (at most
// one; a connector registered without one has its plugin_config left unchecked by `ferry
// check`). It panics on a duplicate name and on a spec that contradicts itself
// ([ConfigSpec.CheckSinkSpec]): registries are filled by code, and either is a programming
// error.
func (r *Registry) AddSink(name string, f SinkFactory, spec ...ConfigSpec) *Registry {
	if _, dup := r.sinks[name]; dup {
		panic(fmt.Sprintf("sdk: sink %q registered twice", name))
	}
	for _, sp := range spec {
		if err := sp.CheckSinkSpec(); err != nil {
			panic(fmt.Sprintf("sdk: sink %q: %v", name, err))
		}
	}
	r.sinks[name] = f
	r.addSpec("sink/"+name, spec)
	return r
}

// AddSource registers a source factory under name, like AddSink.
func (r *Registry) AddSource(name string, f SourceFactory, spec ...ConfigSpec) *Registry {
	if _, dup := r.sources[name]; dup {
		panic(fmt.Sprintf("sdk: source %q registered twice", name))
	}
	r.sources[name] = f
	r.addSpec("source/"+name, spec)
	return r
}

func (r *Registry) addSpec(id string, spec []ConfigSpec) {
	switch len(spec) {
	case 0:
	case 1:
		r.specs[id] = spec[0]
	default:
		panic(fmt.Sprintf("sdk: %s registered with %d specs", id, len(spec)))
	}
}

// SinkSpec returns the plugin_config spec registered with sink name.
func (r *Registry) SinkSpec(name string) (ConfigSpec, bool) {
	s, ok := r.specs["sink/"+name]
	return s, ok
}

// SourceSpec returns the plugin_config spec registered with source name.
func (r *Registry) SourceSpec(name string) (ConfigSpec, bool) {
	s, ok := r.specs["source/"+name]
	return s, ok
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
