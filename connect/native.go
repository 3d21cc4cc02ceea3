//go:build cgo

package connect

import (
	"context"

	"github.com/ferryio/ferry/connect/plugin"
	"github.com/ferryio/ferry/sdk"
)

func init() {
	permanentErrors = append(permanentErrors, plugin.ErrNotLibrary, plugin.ErrMissingSymbol, plugin.ErrCommitUnsupported)
}

// NativeSinkLoader is the [SinkPluginLoader] over connect/plugin: set
// Options.LoadSinkPlugin to it to run native sink plugins (shared libraries with Iggy's
// sink ABI). It opens the library at path once per process (later calls reuse it) and
// checks that it is a complete sink; errors wrap plugin.ErrNotFound, plugin.ErrNotLibrary
// or plugin.ErrMissingSymbol. Every sink the factory returns is a new, unopened
// *plugin.Sink; opening one with a Committer (offset_commit = "sink_controlled") fails
// with an error wrapping plugin.ErrCommitUnsupported when the library does not export
// iggy_sink_set_commit_callback, so that connector is refused at start while the others
// run. Only built with cgo (connect/plugin is the tree's cgo package); safe for
// concurrent use.
func NativeSinkLoader(path string) (sdk.SinkFactory, error) {
	lib, err := plugin.Open(path)
	if err != nil {
		return nil, err
	}
	if err := lib.CheckSink(); err != nil {
		return nil, err // a *plugin.SymbolError: names the path and the missing symbols
	}
	return func() sdk.Sink {
		s, err := lib.NewSink()
		if err != nil { // CheckSink passed, so this cannot happen; refuse at Open if it does
			return failedSink{err}
		}
		return s
	}, nil
}

// NativeSourceLoader is the [SourcePluginLoader] over connect/plugin: set
// Options.LoadSourcePlugin to it to run native source plugins. It opens the library at
// path once per process and checks that it is a complete source; errors wrap
// plugin.ErrNotFound, plugin.ErrNotLibrary or plugin.ErrMissingSymbol (and name the path).
// Every source the factory returns is a new, unopened instance. Only built with cgo.
func NativeSourceLoader(path string) (sdk.SourceFactory, error) {
	lib, err := plugin.Open(path)
	if err != nil {
		return nil, err
	}
	if err := lib.CheckSource(); err != nil {
		return nil, err
	}
	return func() sdk.Source {
		s, err := lib.NewSource()
		if err != nil { // CheckSource passed, so this cannot happen; refuse at Open if it does
			return failedSource{err}
		}
		return s
	}, nil
}

// failedSink refuses to open with the error that kept it from being created.
type failedSink struct{ err error }

func (f failedSink) Open(context.Context, sdk.SinkEnv) error { return f.err }
func (f failedSink) Consume(context.Context, sdk.TopicMetadata, sdk.MessagesMetadata, []sdk.ConsumedMessage) error {
	return f.err
}
func (failedSink) Close(context.Context) error { return nil }

// failedSource refuses to open with the error that kept it from being created.
type failedSource struct{ err error }

func (f failedSource) Open(context.Context, sdk.SourceEnv) error { return f.err }
func (f failedSource) Read(context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	return sdk.SourceBatch{}, nil, f.err
}
func (failedSource) Close(context.Context) error { return nil }
