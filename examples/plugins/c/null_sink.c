/* null_sink.c — accepts every batch and counts messages; decodes only the message count. */
#include <stdatomic.h>
#include <stdio.h>

#include "iggy_connector.h"
#include "postcard.h"

static atomic_uint_fast64_t total;
static iggy_log_cb log_cb;

int32_t iggy_sink_open(uint32_t id, const uint8_t *cfg, size_t cfg_len, iggy_log_cb log) {
    (void)id, (void)cfg, (void)cfg_len;
    if (!log_cb) log_cb = log;
    return 0;
}

int32_t iggy_sink_consume(uint32_t id, const uint8_t *tm, size_t tml, const uint8_t *mm, size_t mml,
                          const uint8_t *ms, size_t msl) {
    (void)id, (void)tm, (void)tml, (void)mm, (void)mml;
    pc_reader r = pc_reader_new(ms, msl);
    pc_u32(&r); /* schema */
    uint64_t n = pc_u64(&r);
    if (r.err) return -1;
    atomic_fetch_add(&total, n);
    return 0;
}

int32_t iggy_sink_close(uint32_t id) {
    if (log_cb) {
        char msg[96];
        int n = snprintf(msg, sizeof msg, "null sink %u closed; %llu messages so far", id,
                         (unsigned long long)atomic_load(&total));
        static const char target[] = "null_sink";
        log_cb(IGGY_LOG_INFO, (const uint8_t *)target, sizeof target - 1, (const uint8_t *)msg, (size_t)n);
    }
    return 0;
}

const char *iggy_sink_version(void) { return "0.1.0-null-sink"; }
