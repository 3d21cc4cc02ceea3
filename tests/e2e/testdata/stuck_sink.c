/* stuck_sink.c — a sink whose consume never returns, for the shutdown tests.
 *
 * The first block_at_call - 1 calls of consume accept their batch; call block_at_call
 * writes "FIRST LAST\n" (the batch's first and last offsets) to the file named by
 * "marker" (written to a temporary name, then renamed: a reader never sees half of it),
 * logs that it is stuck, and then sleeps for good: a native plugin cannot see Go's
 * context, so nothing but the process's end stops it. close logs a line so a test can tell
 * whether the host called it.
 *
 * Config (flat JSON): {"marker": "/path/stuck", "block_at_call": 3}
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "iggy_connector.h"
#include "postcard.h"

static iggy_log_cb log_cb;
static char marker[1024];
static uint64_t block_at = 1;
static atomic_uint_fast64_t calls;

static void say(uint8_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(uint8_t level, const char *fmt, ...) {
    if (!log_cb) return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
    static const char target[] = "stuck_sink";
    log_cb(level, (const uint8_t *)target, sizeof target - 1, (const uint8_t *)msg, (size_t)n);
}

int32_t iggy_sink_open(uint32_t id, const uint8_t *cfg, size_t cfg_len, iggy_log_cb log) {
    if (!log_cb) log_cb = log;
    if (!json_string(cfg, cfg_len, "marker", marker, sizeof marker)) {
        say(IGGY_LOG_ERROR, "config needs \"marker\"");
        return -1;
    }
    json_u64(cfg, cfg_len, "block_at_call", &block_at);
    say(IGGY_LOG_INFO, "stuck sink %u open; consume call %llu will never return", id,
        (unsigned long long)block_at);
    return 0;
}

/* write_marker writes "first last\n" to marker, atomically (temporary file + rename). */
static int write_marker(uint64_t first, uint64_t last) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", marker);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    char line[64];
    int n = snprintf(line, sizeof line, "%llu %llu\n", (unsigned long long)first, (unsigned long long)last);
    int ok = write(fd, line, (size_t)n) == n;
    ok = close(fd) == 0 && ok;
    return ok && rename(tmp, marker) == 0 ? 0 : -1;
}

int32_t iggy_sink_consume(uint32_t id, const uint8_t *tm, size_t tml, const uint8_t *mm, size_t mml,
                          const uint8_t *ms, size_t msl) {
    (void)tm, (void)tml, (void)mm, (void)mml;
    if (atomic_fetch_add(&calls, 1) + 1 < block_at) return 0;

    pc_reader r = pc_reader_new(ms, msl);
    pc_u32(&r); /* schema */
    uint64_t count = pc_u64(&r), first = 0, last = 0;
    for (uint64_t i = 0; i < count && !r.err; i++) {
        uint64_t lo, hi;
        size_t n;
        pc_u128(&r, &lo, &hi); /* id */
        uint64_t offset = pc_u64(&r);
        pc_u64(&r); /* checksum */
        pc_u64(&r); /* timestamp */
        pc_u64(&r); /* origin_timestamp */
        pc_bytes(&r, &n); /* headers */
        pc_bytes(&r, &n); /* payload */
        if (i == 0) first = offset;
        last = offset;
    }
    if (r.err || count == 0) return -1;
    if (write_marker(first, last) != 0) {
        say(IGGY_LOG_ERROR, "writing %s failed", marker);
        return 1;
    }
    say(IGGY_LOG_WARN, "stuck sink %u: consume of offsets %llu..%llu entered; it never returns", id,
        (unsigned long long)first, (unsigned long long)last);
    for (;;) sleep(3600);
}

int32_t iggy_sink_close(uint32_t id) {
    say(IGGY_LOG_INFO, "stuck sink %u closed", id);
    return 0;
}

const char *iggy_sink_version(void) { return "0.1.0-stuck-sink"; }
