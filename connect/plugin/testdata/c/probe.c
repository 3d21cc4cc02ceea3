/* probe.c — test-only plugin for connect/plugin's tests. Compile-time switches:
 *   OMIT_<SYMBOL>   leave one export out (loader error tests)
 *   NO_SINK         export no sink symbols;  NO_COMMIT  no iggy_sink_set_commit_callback
 *   WITH_SOURCE_G3  export a G3 source (iggy_source_handle);  WITH_HANDLE_V2_ONLY  export
 *                   iggy_source_handle_v2 without iggy_source_batch_result
 * Sink config: {"out": "<file>"}. Each message payload is a command; its result is appended
 * to out as one line:
 *   commit S T P OFF          -> cb(own id, S, T, P, OFF), writes "commit RC"
 *   commit-as ID S T P OFF    -> cb(ID, ...), writes "commit RC"
 *   log LEVEL TEXT            -> log callback, writes "log"
 *   sleep MS                  -> sleeps MS milliseconds, writes "slept"
 *   fail / reject             -> consume returns 1 / -1
 * Source G3 config: {"count": N}: sends N one-message batches "g3-<i>" then stops. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "iggy_connector.h"
#include "postcard.h"

static iggy_log_cb log_cb __attribute__((unused));
static iggy_commit_cb commit_cb __attribute__((unused));
static char out_path[1024] __attribute__((unused));

#ifndef NO_SINK
#ifndef OMIT_SINK_OPEN
int32_t iggy_sink_open(uint32_t id, const uint8_t *cfg, size_t n, iggy_log_cb log) {
    (void)id;
    if (!log_cb) log_cb = log;
    if (!json_string(cfg, n, "out", out_path, sizeof out_path)) return -1;
    uint64_t fail = 0;
    if (json_u64(cfg, n, "fail_open", &fail) && fail) return 1;
    return 0;
}
#endif

#ifndef OMIT_SINK_CONSUME
int32_t iggy_sink_consume(uint32_t id, const uint8_t *tm, size_t tml, const uint8_t *mm, size_t mml,
                          const uint8_t *ms, size_t msl) {
    (void)tm, (void)tml, (void)mm, (void)mml;
    pc_reader r = pc_reader_new(ms, msl);
    pc_u32(&r);
    uint64_t count = pc_u64(&r);
    FILE *f = fopen(out_path, "a");
    if (!f) return 1;
    int32_t ret = 0;
    for (uint64_t i = 0; i < count && !r.err; i++) {
        uint64_t lo, hi;
        size_t n;
        pc_u128(&r, &lo, &hi);
        pc_u64(&r), pc_u64(&r), pc_u64(&r), pc_u64(&r);
        pc_bytes(&r, &n);
        const uint8_t *p = pc_bytes(&r, &n);
        if (r.err) break;
        char cmd[256];
        if (n >= sizeof cmd) n = sizeof cmd - 1;
        memcpy(cmd, p, n);
        cmd[n] = 0;
        unsigned s, t, pa, other;
        unsigned long long off;
        int lvl;
        char text[200];
        if (sscanf(cmd, "commit-as %u %u %u %u %llu", &other, &s, &t, &pa, &off) == 5) {
            fprintf(f, "commit %d\n", commit_cb ? commit_cb(other, s, t, pa, off) : 99);
        } else if (sscanf(cmd, "commit %u %u %u %llu", &s, &t, &pa, &off) == 4) {
            fprintf(f, "commit %d\n", commit_cb ? commit_cb(id, s, t, pa, off) : 99);
        } else if (sscanf(cmd, "log %d %199[^\n]", &lvl, text) == 2) {
            log_cb((uint8_t)lvl, (const uint8_t *)"probe", 5, (const uint8_t *)text, strlen(text));
            fprintf(f, "log\n");
        } else if (sscanf(cmd, "sleep %u", &s) == 1) {
            usleep(s * 1000u);
            fprintf(f, "slept\n");
        } else if (strcmp(cmd, "fail") == 0) {
            ret = 1;
        } else if (strcmp(cmd, "reject") == 0) {
            ret = -1;
        }
    }
    fclose(f);
    return r.err ? -1 : ret;
}
#endif

#ifndef OMIT_SINK_CLOSE
int32_t iggy_sink_close(uint32_t id) { (void)id; return 0; }
#endif

#ifndef OMIT_SINK_VERSION
const char *iggy_sink_version(void) { return "9.9.9-probe"; }
#endif

#ifndef NO_COMMIT
int32_t iggy_sink_set_commit_callback(uint32_t id, iggy_commit_cb cb) {
    (void)id;
    commit_cb = cb;
    return 0;
}
#endif
#endif /* NO_SINK */

#if defined(WITH_SOURCE_G3) || defined(WITH_HANDLE_V2_ONLY)
static iggy_send_cb_v1 send_v1;
static uint32_t src_id;
static uint64_t src_count;
static int src_stop, src_started;
static pthread_t src_thread;

#ifndef OMIT_SOURCE_OPEN
int32_t iggy_source_open(uint32_t id, const uint8_t *cfg, size_t n, const uint8_t *st, size_t stn,
                         iggy_log_cb log) {
    (void)st, (void)stn, (void)log;
    src_id = id;
    src_count = 3;
    __atomic_store_n(&src_stop, 0, __ATOMIC_SEQ_CST); /* globals outlive instances */
    json_u64(cfg, n, "count", &src_count);
    return 0;
}
#endif

__attribute__((unused)) static void *g3_produce(void *arg) {
    (void)arg;
    for (uint64_t i = 0; i < src_count && !__atomic_load_n(&src_stop, __ATOMIC_SEQ_CST); i++) {
        pc_writer w = {0};
        char payload[32];
        int len = snprintf(payload, sizeof payload, "g3-%llu", (unsigned long long)i);
        pc_put_varint(&w, 1); /* raw */
        pc_put_varint(&w, 1);
        for (int k = 0; k < 5; k++) pc_put_byte(&w, 0);
        pc_put_bytes(&w, payload, (size_t)len);
        pc_put_byte(&w, 0); /* state: None */
        send_v1(src_id, w.p, w.n);
        pc_writer_free(&w);
    }
    return NULL;
}

#ifdef WITH_SOURCE_G3
#ifndef OMIT_SOURCE_HANDLE
int32_t iggy_source_handle(uint32_t id, iggy_send_cb_v1 cb) {
    (void)id;
    send_v1 = cb;
    src_started = pthread_create(&src_thread, NULL, g3_produce, NULL) == 0;
    return src_started ? 0 : -1;
}
#endif
#else
int32_t iggy_source_handle_v2(uint32_t id, iggy_send_cb_v2 cb) { (void)id, (void)cb; return -1; }
#endif

#ifndef OMIT_SOURCE_CLOSE
int32_t iggy_source_close(uint32_t id) {
    (void)id;
    __atomic_store_n(&src_stop, 1, __ATOMIC_SEQ_CST);
    if (src_started) pthread_join(src_thread, NULL);
    src_started = 0;
    return 0;
}
#endif

#ifndef OMIT_SOURCE_VERSION
const char *iggy_source_version(void) { return "9.9.9-probe-source"; }
#endif
#endif
