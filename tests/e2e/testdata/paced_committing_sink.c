/* paced_committing_sink.c — examples/plugins/c/committing_sink.c, unchanged, with a fixed
 * pause at the start of every consume.
 *
 * The committing sink buffers a batch in microseconds, so Ferry drains a backlog of tens of
 * thousands of messages in a fraction of a second; a crash test that kills the runtime
 * several times mid-backlog needs the backlog to last seconds, whatever the machine. The
 * pause caps the rate at batch_length / consume_pause_ms per topic (Ferry calls consume
 * sequentially per topic) without touching how the sink writes, fsyncs and commits, and
 * without involving the runtime's commit path (max_uncommitted would pace the sink through
 * the very stores under test).
 *
 * Config (flat JSON): the committing sink's keys plus "consume_pause_ms" (default 0).
 */
#include <time.h>

#include "iggy_connector.h"

/* The committing sink's exports, renamed: this file exports wrappers under the ABI names. */
#define iggy_sink_open committing_sink_open
#define iggy_sink_consume committing_sink_consume
#include "committing_sink.c"
#undef iggy_sink_open
#undef iggy_sink_consume

static uint64_t pause_ms;

int32_t iggy_sink_open(uint32_t id, const uint8_t *cfg, size_t cfg_len, iggy_log_cb log) {
    uint64_t ms = 0;
    json_u64(cfg, cfg_len, "consume_pause_ms", &ms);
    pause_ms = ms;
    return committing_sink_open(id, cfg, cfg_len, log);
}

int32_t iggy_sink_consume(uint32_t id, const uint8_t *tm, size_t tml, const uint8_t *mm, size_t mml,
                          const uint8_t *ms, size_t msl) {
    struct timespec d = {(time_t)(pause_ms / 1000), (long)(pause_ms % 1000) * 1000000L};
    while (nanosleep(&d, &d) != 0 && errno == EINTR) {}
    return committing_sink_consume(id, tm, tml, mm, mml, ms, msl);
}
