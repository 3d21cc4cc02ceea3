package plugin

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// ABI symbol names.
const (
	SymSinkOpen          = "iggy_sink_open"
	SymSinkConsume       = "iggy_sink_consume"
	SymSinkClose         = "iggy_sink_close"
	SymSinkVersion       = "iggy_sink_version"
	SymSinkSetCommit     = "iggy_sink_set_commit_callback"
	SymSinkSetTopicIDs   = "iggy_sink_set_topic_ids"
	SymSourceOpen        = "iggy_source_open"
	SymSourceClose       = "iggy_source_close"
	SymSourceVersion     = "iggy_source_version"
	SymSourceHandleV2    = "iggy_source_handle_v2"
	SymSourceBatchResult = "iggy_source_batch_result"
	SymSourceHandle      = "iggy_source_handle"
)

// Generation is the source ABI generation a library implements.
type Generation int

const (
	// NoSource: the library is not a (complete) source.
	NoSource Generation = iota
	// SourceG3: iggy_source_handle, fire and forget: no acknowledgement, no flow control.
	SourceG3
	// SourceG4: iggy_source_handle_v2 + iggy_source_batch_result, one batch in flight.
	SourceG4
)

// Library is a loaded plugin library. It is shared by every connector that points at the same
// file and is never unloaded. Safe for concurrent use.
type Library struct {
	path string
	slot uint32 // log trampoline; 0 = shared/unattributed

	sinkOpen, sinkConsume, sinkClose, sinkVersion, sinkSetCommit          unsafe.Pointer
	sinkSetTopicIDs                                                       unsafe.Pointer
	srcOpen, srcClose, srcVersion, srcHandleV2, srcBatchResult, srcHandle unsafe.Pointer
	sinkMissing, sourceMissing                                            []string
	gen                                                                   Generation
	version                                                               string

	mu   sync.Mutex
	live map[uint32]liveInstance // open instances, for log attribution
}

type liveInstance struct {
	key    string
	logger *slog.Logger
}

var (
	libsMu   sync.Mutex
	libs     = map[string]*loaded{} // resolved path → load result
	nextSlot uint32                 // last log slot handed out
	logLibs  [logSlots]atomic.Pointer[Library]
	nextID   atomic.Uint32 // plugin ids: first Add returns 1
)

type loaded struct {
	lib *Library
	err error
}

func newPluginID() uint32 {
	for {
		if id := nextID.Add(1); id != 0 {
			return id
		}
	}
}

// Open loads the plugin library at path, once per resolved path per process (later calls
// return the same *Library, or the same symbol error), and resolves its ABI symbols. It
// fails with an error wrapping ErrNotFound when the file is missing, ErrNotLibrary (with
// dlerror's text) when dlopen refuses it, and a *SymbolError (ErrMissingSymbol) naming every
// missing symbol when the library is neither a complete sink nor a complete source. A
// library that is one but not the other loads; [Library.CheckSink]/[Library.CheckSource]
// then say what the other role lacks. Safe for concurrent use.
func Open(path string) (*Library, error) {
	abs, err := filepath.Abs(path)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("plugin %s: %w: %w", path, ErrNotFound, err)
		}
		return nil, fmt.Errorf("plugin %s: %w", path, err)
	}
	if st, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("plugin %s: %w: %w", path, ErrNotFound, err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("plugin %s: %w: %s is not a regular file", path, ErrNotLibrary, abs)
	}
	libsMu.Lock()
	defer libsMu.Unlock()
	if l, ok := libs[abs]; ok {
		return l.lib, l.err
	}
	h, err := dlopen(abs)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w: %w", path, ErrNotLibrary, err)
	}
	lib := resolve(abs, h)
	l := &loaded{lib: lib}
	if lib.sinkMissing != nil && lib.gen == NoSource {
		l.lib, l.err = nil, lib.roleError()
	} else {
		if nextSlot+1 < logSlots {
			nextSlot++
			lib.slot = nextSlot
			logLibs[lib.slot].Store(lib)
		}
		lib.version = lib.readVersion()
	}
	libs[abs] = l
	return l.lib, l.err
}

func resolve(path string, h unsafe.Pointer) *Library {
	lib := &Library{path: path, live: map[uint32]liveInstance{}}
	sym := func(name string, missing *[]string) unsafe.Pointer {
		p := dlsym(h, name)
		if p == nil && missing != nil {
			*missing = append(*missing, name)
		}
		return p
	}
	var sinkMissing, srcMissing []string
	lib.sinkOpen = sym(SymSinkOpen, &sinkMissing)
	lib.sinkConsume = sym(SymSinkConsume, &sinkMissing)
	lib.sinkClose = sym(SymSinkClose, &sinkMissing)
	lib.sinkVersion = sym(SymSinkVersion, &sinkMissing)
	lib.sinkSetCommit = sym(SymSinkSetCommit, nil)
	lib.sinkSetTopicIDs = sym(SymSinkSetTopicIDs, nil)
	lib.srcOpen = sym(SymSourceOpen, &srcMissing)
	lib.srcClose = sym(SymSourceClose, &srcMissing)
	lib.srcVersion = sym(SymSourceVersion, &srcMissing)
	lib.srcHandleV2 = sym(SymSourceHandleV2, nil)
	lib.srcBatchResult = sym(SymSourceBatchResult, nil)
	lib.srcHandle = sym(SymSourceHandle, nil)
	switch {
	case lib.srcHandleV2 != nil && lib.srcBatchResult != nil:
		lib.gen = SourceG4
	case lib.srcHandle != nil:
		lib.gen = SourceG3
	case lib.srcHandleV2 != nil:
		srcMissing = append(srcMissing, SymSourceBatchResult)
	case lib.srcBatchResult != nil:
		srcMissing = append(srcMissing, SymSourceHandleV2)
	default:
		srcMissing = append(srcMissing, SymSourceHandleV2+" + "+SymSourceBatchResult+" (or "+SymSourceHandle+")")
	}
	if len(srcMissing) > 0 {
		lib.gen = NoSource
	}
	lib.sinkMissing, lib.sourceMissing = sinkMissing, srcMissing
	return lib
}

// roleError explains why a library is neither a sink nor a source, naming the role it seems
// to intend (the one with any symbol present) or both.
func (l *Library) roleError() error {
	sinkAny := len(l.sinkMissing) < 4
	srcAny := l.srcOpen != nil || l.srcClose != nil || l.srcVersion != nil || l.srcHandleV2 != nil || l.srcBatchResult != nil || l.srcHandle != nil
	switch {
	case sinkAny && !srcAny:
		return &SymbolError{Path: l.path, Role: "sink", Missing: l.sinkMissing}
	case srcAny && !sinkAny:
		return &SymbolError{Path: l.path, Role: "source", Missing: l.sourceMissing}
	}
	return &SymbolError{Path: l.path, Role: "sink or source", Missing: append(slices.Clone(l.sinkMissing), l.sourceMissing...)}
}

func (l *Library) readVersion() string {
	if l.sinkMissing == nil {
		return callVersion(l.sinkVersion)
	}
	return callVersion(l.srcVersion)
}

// Path returns the library's resolved path.
func (l *Library) Path() string { return l.path }

// Version returns the string the library's iggy_sink_version (or, for a source-only
// library, iggy_source_version) returned at load: the plugin crate's version.
func (l *Library) Version() string { return l.version }

// SourceGeneration reports which source ABI the library implements (NoSource if none).
func (l *Library) SourceGeneration() Generation { return l.gen }

// SupportsCommit reports whether the library exports iggy_sink_set_commit_callback.
func (l *Library) SupportsCommit() bool { return l.sinkSetCommit != nil }

// CheckSink returns nil when the library is a complete sink, else a *SymbolError.
func (l *Library) CheckSink() error {
	if l.sinkMissing != nil {
		return &SymbolError{Path: l.path, Role: "sink", Missing: l.sinkMissing}
	}
	return nil
}

// CheckSource returns nil when the library is a complete (G3 or G4) source, else a
// *SymbolError.
func (l *Library) CheckSource() error {
	if l.gen == NoSource {
		return &SymbolError{Path: l.path, Role: "source", Missing: l.sourceMissing}
	}
	return nil
}

func (l *Library) register(id uint32, key string, logger *slog.Logger) {
	l.mu.Lock()
	l.live[id] = liveInstance{key: key, logger: logger}
	l.mu.Unlock()
}

func (l *Library) unregister(id uint32) {
	l.mu.Lock()
	delete(l.live, id)
	l.mu.Unlock()
}

// logDest picks where a plugin log line of this library goes (see the package doc).
func (l *Library) logDest(attrs []any) (*slog.Logger, []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.live) == 1 {
		for _, in := range l.live {
			if in.logger != nil {
				return in.logger, attrs
			}
			return slog.Default(), append(attrs, "connector", in.key, "plugin", l.path)
		}
	}
	keys := make([]string, 0, len(l.live))
	for _, in := range l.live {
		keys = append(keys, in.key)
	}
	slices.Sort(keys)
	return slog.Default(), append(attrs, "plugin", l.path, "connectors", keys)
}
