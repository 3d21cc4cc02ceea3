package plugin

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "iggy_connector.h"

// Exported from callbacks.go (signatures as cgo declares them).
extern void ferryLog(uint32_t slot, uint8_t level, uint8_t* target, size_t targetLen, uint8_t* msg, size_t msgLen);
extern int32_t ferryCommit(uint32_t pluginID, uint32_t streamID, uint32_t topicID, uint32_t partitionID, uint64_t offset);
extern int32_t ferrySendV2(uint32_t pluginID, uint64_t batchID, uint8_t* msgs, size_t msgsLen);
extern void ferrySendV1(uint32_t pluginID, uint8_t* msgs, size_t msgsLen);

static const uint8_t ferry_empty[1];
static const uint8_t *ferry_empty_ptr(void) { return ferry_empty; }

// dlopen and dlerror on the same thread (dlerror is thread-local; Go may switch threads
// between two cgo calls). *err is malloc'ed; the caller frees it.
static void *ferry_dlopen(const char *path, char **err) {
	dlerror();
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		*err = strdup(e != NULL ? e : "dlopen failed");
	}
	return h;
}

static void *ferry_dlsym(void *h, const char *name) {
	dlerror();
	void *p = dlsym(h, name);
	dlerror();
	return p;
}

// One log trampoline per library slot: the ABI's log callback has no plugin id.
#define FERRY_LOG_SLOTS 64
#define T(n) static void ferry_log_##n(uint8_t l, const uint8_t *t, size_t tl, const uint8_t *m, size_t ml) { ferryLog(n, l, (uint8_t*)t, tl, (uint8_t*)m, ml); }
#define T8(a) T(a##0) T(a##1) T(a##2) T(a##3) T(a##4) T(a##5) T(a##6) T(a##7)
T8() T8(1) T8(2) T8(3) T8(4) T8(5) T8(6) T8(7)
#undef T
#define T(n) ferry_log_##n,
static const iggy_log_cb ferry_log_table[FERRY_LOG_SLOTS] = { T8() T8(1) T8(2) T8(3) T8(4) T8(5) T8(6) T8(7) };
#undef T
#undef T8
static iggy_log_cb ferry_log_cb(uint32_t slot) {
	return ferry_log_table[slot < FERRY_LOG_SLOTS ? slot : 0];
}

static int32_t ferry_commit_cb(uint32_t p, uint32_t s, uint32_t t, uint32_t pa, uint64_t o) {
	return ferryCommit(p, s, t, pa, o);
}
static int32_t ferry_send_v2(uint32_t id, uint64_t batch, const uint8_t *m, size_t n) {
	return ferrySendV2(id, batch, (uint8_t*)m, n);
}
static void ferry_send_v1(uint32_t id, const uint8_t *m, size_t n) {
	ferrySendV1(id, (uint8_t*)m, n);
}

static int32_t ferry_call_sink_open(void *fn, uint32_t id, const uint8_t *cfg, size_t n, uint32_t slot) {
	return ((iggy_sink_open_fn)fn)(id, cfg, n, ferry_log_cb(slot));
}
static int32_t ferry_call_sink_consume(void *fn, uint32_t id, const uint8_t *tm, size_t tml,
		const uint8_t *mm, size_t mml, const uint8_t *ms, size_t msl) {
	return ((iggy_sink_consume_fn)fn)(id, tm, tml, mm, mml, ms, msl);
}
static int32_t ferry_call_close(void *fn, uint32_t id) { return ((iggy_close_fn)fn)(id); }
static const char *ferry_call_version(void *fn) { return ((iggy_version_fn)fn)(); }
static int32_t ferry_call_set_commit(void *fn, uint32_t id) {
	return ((iggy_sink_set_commit_callback_fn)fn)(id, ferry_commit_cb);
}
static int32_t ferry_call_set_topic_ids(void *fn, uint32_t id, const uint8_t *s, size_t sn,
		const uint8_t *t, size_t tn, uint32_t sid, uint32_t tid) {
	return ((iggy_sink_set_topic_ids_fn)fn)(id, s, sn, t, tn, sid, tid);
}
static int32_t ferry_call_source_open(void *fn, uint32_t id, const uint8_t *cfg, size_t n,
		const uint8_t *st, size_t stn, uint32_t slot) {
	return ((iggy_source_open_fn)fn)(id, cfg, n, st, stn, ferry_log_cb(slot));
}
static int32_t ferry_call_handle_v2(void *fn, uint32_t id) {
	return ((iggy_source_handle_v2_fn)fn)(id, ferry_send_v2);
}
static int32_t ferry_call_handle_v1(void *fn, uint32_t id) {
	return ((iggy_source_handle_fn)fn)(id, ferry_send_v1);
}
static int32_t ferry_call_batch_result(void *fn, uint32_t id, uint64_t batch, uint8_t r) {
	return ((iggy_source_batch_result_fn)fn)(id, batch, r);
}
*/
import "C"

import (
	"errors"
	"strings"
	"unsafe"
)

// logSlots is the size of the C trampoline table; slot 0 is the shared, unattributed one.
const logSlots = C.FERRY_LOG_SLOTS

func dlopen(path string) (unsafe.Pointer, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var cerr *C.char
	h := C.ferry_dlopen(cpath, &cerr)
	if h == nil {
		msg := C.GoString(cerr)
		C.free(unsafe.Pointer(cerr))
		return nil, errors.New(msg)
	}
	return h, nil
}

func dlsym(h unsafe.Pointer, name string) unsafe.Pointer {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.ferry_dlsym(h, cname)
}

// cbuf returns a C view of b: never NULL, a static byte when b is empty.
func cbuf(b []byte) (*C.uint8_t, C.size_t) {
	if len(b) == 0 {
		return C.ferry_empty_ptr(), 0
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0])), C.size_t(len(b))
}

func callVersion(fn unsafe.Pointer) string {
	p := C.ferry_call_version(fn)
	if p == nil {
		return ""
	}
	return strings.ToValidUTF8(C.GoString(p), "\uFFFD")
}

func callSinkOpen(fn unsafe.Pointer, id uint32, cfg []byte, slot uint32) int32 {
	p, n := cbuf(cfg)
	return int32(C.ferry_call_sink_open(fn, C.uint32_t(id), p, n, C.uint32_t(slot)))
}

func callSinkConsume(fn unsafe.Pointer, id uint32, tm, mm, ms []byte) int32 {
	tp, tn := cbuf(tm)
	mp, mn := cbuf(mm)
	sp, sn := cbuf(ms)
	return int32(C.ferry_call_sink_consume(fn, C.uint32_t(id), tp, tn, mp, mn, sp, sn))
}

func callClose(fn unsafe.Pointer, id uint32) int32 {
	return int32(C.ferry_call_close(fn, C.uint32_t(id)))
}

func callSetCommit(fn unsafe.Pointer, id uint32) int32 {
	return int32(C.ferry_call_set_commit(fn, C.uint32_t(id)))
}

func callSetTopicIDs(fn unsafe.Pointer, id uint32, stream, topic string, streamID, topicID uint32) int32 {
	sp, sn := cbuf([]byte(stream))
	tp, tn := cbuf([]byte(topic))
	return int32(C.ferry_call_set_topic_ids(fn, C.uint32_t(id), sp, sn, tp, tn, C.uint32_t(streamID), C.uint32_t(topicID)))
}

// callSourceOpen passes state as NULL when it is nil, and as a non-NULL pointer otherwise
// (even when empty): the SDK reads any non-NULL pointer as Some(state).
func callSourceOpen(fn unsafe.Pointer, id uint32, cfg, state []byte, slot uint32) int32 {
	p, n := cbuf(cfg)
	var sp *C.uint8_t
	var sn C.size_t
	if state != nil {
		sp, sn = cbuf(state)
	}
	return int32(C.ferry_call_source_open(fn, C.uint32_t(id), p, n, sp, sn, C.uint32_t(slot)))
}

func callHandleV2(fn unsafe.Pointer, id uint32) int32 {
	return int32(C.ferry_call_handle_v2(fn, C.uint32_t(id)))
}

func callHandleV1(fn unsafe.Pointer, id uint32) int32 {
	return int32(C.ferry_call_handle_v1(fn, C.uint32_t(id)))
}

func callBatchResult(fn unsafe.Pointer, id uint32, batch uint64, result uint8) int32 {
	return int32(C.ferry_call_batch_result(fn, C.uint32_t(id), C.uint64_t(batch), C.uint8_t(result)))
}
