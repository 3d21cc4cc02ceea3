package plugin

import (
	"errors"
	"fmt"
	"strings"
)

// Loader errors.
var (
	// ErrNotFound: the plugin file does not exist (wrapped with the path and fs error).
	ErrNotFound = errors.New("plugin file not found")
	// ErrNotLibrary: dlopen refused the file: not a shared library, wrong architecture, or a
	// dependency missing. The error text carries dlerror's message.
	ErrNotLibrary = errors.New("not a loadable shared library")
	// ErrMissingSymbol: a required ABI symbol is missing; see *SymbolError.
	ErrMissingSymbol = errors.New("missing plugin symbol")
	// ErrCommitUnsupported: a sink was opened with a Committer (offset_commit =
	// "sink_controlled") but its library does not export iggy_sink_set_commit_callback.
	ErrCommitUnsupported = errors.New("plugin does not support sink-controlled commits")
)

// Call errors: what a plugin export's return code means.
var (
	// ErrPluginFailed: the export returned 1 — the plugin's own open/consume failed.
	ErrPluginFailed = errors.New("plugin reported an error")
	// ErrPluginRejected: the export returned -1 — the plugin could not decode its input
	// (config, postcard buffers) or does not know the instance id.
	ErrPluginRejected = errors.New("plugin rejected the call (undecodable input or unknown instance)")
	// ErrResultRefused: iggy_source_batch_result returned -1 — the plugin has no such batch
	// pending (it gave up on it after its own result timeout, 30 s in the official SDK, or
	// the instance is gone); it produces those messages again.
	ErrResultRefused = errors.New("plugin refused the batch result: no such batch pending (it gave up on the batch after its own timeout, or the instance is gone)")
	// ErrUnexpectedCode: any other return code.
	ErrUnexpectedCode = errors.New("plugin returned an unexpected code")
	// ErrClosed: the instance is not open (never opened, closing or closed).
	ErrClosed = errors.New("plugin instance not open")
	// ErrAlreadyOpen: Open on an instance that is open.
	ErrAlreadyOpen = errors.New("plugin instance already open")
	// ErrAckTwice: a source batch's AckFunc was called a second time.
	ErrAckTwice = errors.New("source batch acknowledged twice")
)

// SymbolError names the symbols a library lacks for the role it was asked to play.
type SymbolError struct {
	Path    string
	Role    string // "sink" or "source"
	Missing []string
}

func (e *SymbolError) Error() string {
	return fmt.Sprintf("plugin %s: not a %s: missing symbol(s) %s", e.Path, e.Role, strings.Join(e.Missing, ", "))
}

// Unwrap makes errors.Is(err, ErrMissingSymbol) true.
func (e *SymbolError) Unwrap() error { return ErrMissingSymbol }

// CallError is a non-zero return code from a plugin export.
type CallError struct {
	Path string
	Op   string // the export, e.g. "iggy_sink_consume"
	ID   uint32 // plugin instance id
	Code int32
}

func (e *CallError) Error() string {
	return fmt.Sprintf("plugin %s: %s(id %d) returned %d: %v", e.Path, e.Op, e.ID, e.Code, e.Unwrap())
}

// Unwrap maps the code: 1 → ErrPluginFailed, -1 → ErrPluginRejected (ErrResultRefused
// for iggy_source_batch_result), else ErrUnexpectedCode.
func (e *CallError) Unwrap() error {
	switch e.Code {
	case 1:
		return ErrPluginFailed
	case -1:
		if e.Op == SymSourceBatchResult {
			return ErrResultRefused
		}
		return ErrPluginRejected
	}
	return ErrUnexpectedCode
}

func callErr(lib *Library, op string, id uint32, code int32) error {
	if code == 0 {
		return nil
	}
	return &CallError{Path: lib.path, Op: op, ID: id, Code: code}
}
