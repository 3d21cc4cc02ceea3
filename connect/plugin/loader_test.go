package plugin

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestOpenMissingFile(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nope.so"))
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

func TestOpenNotALibrary(t *testing.T) {
	p := filepath.Join(t.TempDir(), "text.so")
	if err := os.WriteFile(p, []byte("not an ELF file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(p)
	if !errors.Is(err, ErrNotLibrary) || !strings.Contains(err.Error(), "text.so") {
		t.Fatalf("err = %v, want ErrNotLibrary with dlerror text", err)
	}
	// dlerror's own words are kept (glibc: "invalid ELF header" or "file too short").
	if !strings.Contains(err.Error(), "ELF") && !strings.Contains(err.Error(), "too short") {
		t.Fatalf("dlerror text missing: %v", err)
	}
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrNotLibrary) {
		t.Fatalf("directory: err = %v, want ErrNotLibrary", err)
	}
}

func TestOpenMissingSymbols(t *testing.T) {
	for _, tc := range []struct {
		name    string
		defines []string
		role    string
		missing []string
	}{
		{"no_sink_open", []string{"OMIT_SINK_OPEN"}, "sink", []string{SymSinkOpen}},
		{"no_sink_consume", []string{"OMIT_SINK_CONSUME"}, "sink", []string{SymSinkConsume}},
		{"no_sink_close", []string{"OMIT_SINK_CLOSE"}, "sink", []string{SymSinkClose}},
		{"no_sink_version", []string{"OMIT_SINK_VERSION"}, "sink", []string{SymSinkVersion}},
		{"no_source_open", []string{"NO_SINK", "WITH_SOURCE_G3", "OMIT_SOURCE_OPEN"}, "source", []string{SymSourceOpen}},
		{"no_source_close", []string{"NO_SINK", "WITH_SOURCE_G3", "OMIT_SOURCE_CLOSE"}, "source", []string{SymSourceClose}},
		{"no_source_version", []string{"NO_SINK", "WITH_SOURCE_G3", "OMIT_SOURCE_VERSION"}, "source", []string{SymSourceVersion}},
		{"no_source_handle", []string{"NO_SINK", "WITH_SOURCE_G3", "OMIT_SOURCE_HANDLE"}, "source",
			[]string{SymSourceHandleV2 + " + " + SymSourceBatchResult + " (or " + SymSourceHandle + ")"}},
		{"handle_v2_only", []string{"NO_SINK", "WITH_HANDLE_V2_ONLY"}, "source", []string{SymSourceBatchResult}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := probe(t, "probe_"+tc.name, tc.defines...)
			lib, err := Open(path)
			var se *SymbolError
			if lib != nil || !errors.As(err, &se) || !errors.Is(err, ErrMissingSymbol) {
				t.Fatalf("Open = %v, %v; want *SymbolError", lib, err)
			}
			if se.Role != tc.role || !reflect.DeepEqual(se.Missing, tc.missing) || !strings.Contains(err.Error(), path) {
				t.Fatalf("got role %q missing %q (%v); want %q %q", se.Role, se.Missing, err, tc.role, tc.missing)
			}
			// The failure is remembered: the library is loaded once, never unloaded.
			if _, err2 := Open(path); err2 != err { //nolint:errorlint // the cached error value itself must come back
				t.Fatalf("second Open: %v, want the same error", err2)
			}
		})
	}
}

func TestOpenNoConnectorSymbols(t *testing.T) {
	path := probe(t, "probe_empty", "NO_SINK")
	_, err := Open(path)
	var se *SymbolError
	if !errors.As(err, &se) || se.Role != "sink or source" || len(se.Missing) != 8 {
		t.Fatalf("err = %v", err)
	}
}

func TestOpenDedupeAndVersion(t *testing.T) {
	path := probe(t, "probe_sink")
	a, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link.so")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	b, err := Open(link)
	if err != nil || a != b {
		t.Fatalf("Open via symlink = %p, %v; want the same *Library %p", b, err, a)
	}
	if a.Version() != "9.9.9-probe" || !a.SupportsCommit() || a.SourceGeneration() != NoSource || a.Path() != path {
		t.Fatalf("version %q commit %v gen %v path %q", a.Version(), a.SupportsCommit(), a.SourceGeneration(), a.Path())
	}
	if _, err := a.NewSource(); !errors.Is(err, ErrMissingSymbol) {
		t.Fatalf("NewSource on a sink library: %v", err)
	}
	g3, err := Open(probe(t, "probe_g3", "NO_SINK", "WITH_SOURCE_G3"))
	if err != nil || g3.SourceGeneration() != SourceG3 || g3.Version() != "9.9.9-probe-source" {
		t.Fatalf("g3: %v %v", g3, err)
	}
	if _, err := g3.NewSink(); !errors.Is(err, ErrMissingSymbol) {
		t.Fatalf("NewSink on a source library: %v", err)
	}
}
