/* liarcommit.c — a broken runtime's half for broken_test.go: a plugin that wraps the real
 * probe ($LIAR_REAL_PLUGIN, loaded with dlopen), forwards every sink export to it, and
 * hands the probe a commit callback of its own that calls the runtime's and returns 0
 * where the runtime refused the commit (a negative code). To the suite, which sees the
 * runtime only from outside, that is a runtime whose commit callback accepts commits it
 * must refuse (stale, out of range, foreign, unknown, after the stop).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*log_cb)(uint8_t, const uint8_t *, size_t, const uint8_t *, size_t);
typedef int32_t (*commit_cb)(uint32_t, uint32_t, uint32_t, uint32_t, uint64_t);

static int32_t (*real_open)(uint32_t, const uint8_t *, size_t, log_cb);
static int32_t (*real_consume)(uint32_t, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, size_t);
static int32_t (*real_close)(uint32_t);
static const char *(*real_version)(void);
static int32_t (*real_set_commit)(uint32_t, commit_cb);
static commit_cb runtime_commit; /* the runtime's callback, set before the first consume */

__attribute__((constructor)) static void load(void) {
    const char *path = getenv("LIAR_REAL_PLUGIN");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        fprintf(stderr, "liarcommit: cannot load $LIAR_REAL_PLUGIN (%s): %s\n", path ? path : "unset", dlerror());
        return;
    }
    real_open = (int32_t (*)(uint32_t, const uint8_t *, size_t, log_cb))dlsym(h, "iggy_sink_open");
    real_consume = (int32_t (*)(uint32_t, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, size_t))dlsym(h, "iggy_sink_consume");
    real_close = (int32_t (*)(uint32_t))dlsym(h, "iggy_sink_close");
    real_version = (const char *(*)(void))dlsym(h, "iggy_sink_version");
    real_set_commit = (int32_t (*)(uint32_t, commit_cb))dlsym(h, "iggy_sink_set_commit_callback");
}

static int32_t lying_commit(uint32_t id, uint32_t stream, uint32_t topic, uint32_t part, uint64_t off) {
    commit_cb cb = __atomic_load_n(&runtime_commit, __ATOMIC_ACQUIRE);
    int32_t rc = cb(id, stream, topic, part, off);
    return rc < 0 ? 0 : rc;
}

int32_t iggy_sink_open(uint32_t id, const uint8_t *cfg, size_t len, log_cb log) {
    return real_open ? real_open(id, cfg, len, log) : -1;
}

int32_t iggy_sink_consume(uint32_t id, const uint8_t *tm, size_t tml, const uint8_t *mm, size_t mml,
                          const uint8_t *ms, size_t msl) {
    return real_consume ? real_consume(id, tm, tml, mm, mml, ms, msl) : -1;
}

int32_t iggy_sink_close(uint32_t id) { return real_close ? real_close(id) : -1; }

const char *iggy_sink_version(void) { return real_version ? real_version() : "liarcommit"; }

int32_t iggy_sink_set_commit_callback(uint32_t id, commit_cb cb) {
    if (!real_set_commit) return -1;
    __atomic_store_n(&runtime_commit, cb, __ATOMIC_RELEASE);
    return real_set_commit(id, lying_commit);
}
