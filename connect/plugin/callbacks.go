package plugin

// The //export functions below are the only entry points from plugins into Go. Rules for all
// of them: copy what they keep, never block, never call a plugin export, never panic across
// the cgo boundary. The preamble may hold declarations only (cgo copies it twice).

/*
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"unsafe"

	"github.com/ferryio/ferry/sdk"
)

// Commit callback return codes (include/iggy_connector.h).
const (
	commitOK         = 0
	commitUnknown    = -1
	commitStale      = -2
	commitOutOfRange = -3
	commitOther      = -4
)

//export ferryCommit
func ferryCommit(pluginID, streamID, topicID, partitionID C.uint32_t, offset C.uint64_t) C.int32_t {
	return C.int32_t(commit(uint32(pluginID), sdk.Partition{
		StreamID: uint32(streamID), TopicID: uint32(topicID), PartitionID: uint32(partitionID),
	}, uint64(offset)))
}

// commit routes one plugin commit to the Committer of the sink instance pluginID and maps
// the outcome to the ABI's return code.
func commit(pluginID uint32, p sdk.Partition, offset uint64) (code int32) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("plugin commit: committer panicked", "plugin_id", pluginID, "panic", fmt.Sprint(r))
			code = commitOther
		}
	}()
	v, ok := commitRoutes.Load(pluginID)
	if !ok {
		return commitUnknown
	}
	err := v.(sdk.Committer).Commit(p, offset)
	switch {
	case err == nil:
		return commitOK
	case errors.Is(err, sdk.ErrCommitUnknownPartition):
		return commitUnknown
	case errors.Is(err, sdk.ErrCommitStale):
		return commitStale
	case errors.Is(err, sdk.ErrCommitOutOfRange):
		return commitOutOfRange
	}
	return commitOther
}

// goBytes views a plugin-owned buffer; nil when n is 0 (the pointer may then dangle).
func goBytes(p *C.uint8_t, n C.size_t) []byte {
	if n == 0 || p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n))
}

//export ferryLog
func ferryLog(slot C.uint32_t, level C.uint8_t, target *C.uint8_t, targetLen C.size_t, msg *C.uint8_t, msgLen C.size_t) {
	defer func() { _ = recover() }()
	logLine(uint32(slot), uint8(level), string(goBytes(target, targetLen)), string(goBytes(msg, msgLen)))
}

// LevelTrace is the slog level plugin TRACE lines are logged at.
const LevelTrace = slog.LevelDebug - 4

// pluginLevel maps the ABI's level byte to slog: 0 TRACE, 1 DEBUG, 2 INFO, 3 WARN, 4 and any
// other value ERROR.
func pluginLevel(l uint8) slog.Level {
	switch l {
	case 0:
		return LevelTrace
	case 1:
		return slog.LevelDebug
	case 2:
		return slog.LevelInfo
	case 3:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func logLine(slot uint32, level uint8, target, msg string) {
	lvl := pluginLevel(level)
	var lib *Library
	if slot < logSlots {
		lib = logLibs[slot].Load()
	}
	logger, attrs := slog.Default(), []any{"target", target}
	if lib != nil {
		logger, attrs = lib.logDest(attrs)
	}
	if !logger.Enabled(context.Background(), lvl) {
		return
	}
	logger.Log(context.Background(), lvl, msg, attrs...)
}

//export ferrySendV2
func ferrySendV2(pluginID C.uint32_t, batchID C.uint64_t, msgs *C.uint8_t, msgsLen C.size_t) (code C.int32_t) {
	defer func() {
		if r := recover(); r != nil {
			code = -1
		}
	}()
	return C.int32_t(sendV2(uint32(pluginID), uint64(batchID), goBytes(msgs, msgsLen)))
}

//export ferrySendV1
func ferrySendV1(pluginID C.uint32_t, msgs *C.uint8_t, msgsLen C.size_t) {
	defer func() { _ = recover() }()
	sendV1(uint32(pluginID), goBytes(msgs, msgsLen))
}
