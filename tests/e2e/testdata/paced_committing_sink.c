/* paced_committing_sink.c — examples/plugins/c/committing_sink.c, unchanged, with a fixed
 * pause at the start of every consume and a record of every commit it made.
 *
 * The committing sink buffers a batch in microseconds, so Ferry drains a backlog of tens of
 * thousands of messages in a fraction of a second; a crash test that kills the runtime
 * several times mid-backlog needs the backlog to last seconds, whatever the machine. The
 * pause caps the rate at batch_length / consume_pause_ms per topic (Ferry calls consume
 * sequentially per topic) without touching how the sink writes, fsyncs and commits, and
 * without involving the runtime's commit path (max_uncommitted would pace the sink through
 * the very stores under test).
 *
 * The record lets the test judge the runtime's part alone: how long the sink's own write and
 * fsync took is the disk's business, what the runtime did with a commit it was handed is
 * the runtime's. After each commit callback that returns IGGY_COMMIT_OK the fixture appends
 * "PARTITION OFFSET UNIX_NANOS\n" to commits_path (one write(2), no fsync: a SIGKILL of
 * the process keeps what it wrote).
 *
 * Config (flat JSON): the committing sink's keys plus "consume_pause_ms" (default 0) and
 * "commits_path" (default: no record).
 */
#include <time.h>

#include "iggy_connector.h"

/* The committing sink's exports, renamed: this file exports wrappers under the ABI names. */
#define iggy_sink_open committing_sink_open
#define iggy_sink_consume committing_sink_consume
#define iggy_sink_set_commit_callback committing_sink_set_commit_callback
#include "committing_sink.c"
#undef iggy_sink_open
#undef iggy_sink_consume
#undef iggy_sink_set_commit_callback

static uint64_t pause_ms;
static int commits_fd = -1;
static iggy_commit_cb runtime_commit;

int32_t iggy_sink_open(uint32_t id, const uint8_t *cfg, size_t cfg_len, iggy_log_cb log) {
    uint64_t ms = 0;
    json_u64(cfg, cfg_len, "consume_pause_ms", &ms);
    pause_ms = ms;
    char path[1024];
    if (json_string(cfg, cfg_len, "commits_path", path, sizeof path)) {
        commits_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (commits_fd < 0) return 1;
    }
    return committing_sink_open(id, cfg, cfg_len, log);
}

int32_t iggy_sink_consume(uint32_t id, const uint8_t *tm, size_t tml, const uint8_t *mm, size_t mml,
                          const uint8_t *ms, size_t msl) {
    struct timespec d = {(time_t)(pause_ms / 1000), (long)(pause_ms % 1000) * 1000000L};
    while (nanosleep(&d, &d) != 0 && errno == EINTR) {}
    return committing_sink_consume(id, tm, tml, mm, mml, ms, msl);
}

/* recording_commit is the callback the committing sink calls: the runtime's, then a record. */
static int32_t recording_commit(uint32_t id, uint32_t stream_id, uint32_t topic_id, uint32_t partition_id,
                                uint64_t offset) {
    int32_t rc = runtime_commit(id, stream_id, topic_id, partition_id, offset);
    if (rc == IGGY_COMMIT_OK && commits_fd >= 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        char line[96];
        int n = snprintf(line, sizeof line, "%u %llu %lld\n", partition_id, (unsigned long long)offset,
                         (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
        if (n > 0 && write(commits_fd, line, (size_t)n) != n)
            logf_(IGGY_LOG_ERROR, "commits record: errno %d", errno);
    }
    return rc;
}

int32_t iggy_sink_set_commit_callback(uint32_t id, iggy_commit_cb cb) {
    runtime_commit = cb;
    return committing_sink_set_commit_callback(id, cb ? recording_commit : NULL);
}
