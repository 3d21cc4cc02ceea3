/* committing_sink.c — a sink that commits only what it has made durable.
 *
 * consume() appends each message payload plus '\n' to an in-memory buffer and remembers the
 * highest buffered offset per (stream_id, topic_id, partition_id) — the ids come from Ferry's
 * extension appended to TopicMetadata and from MessagesMetadata. A background thread, every
 * flush_interval_ms, writes the buffer to the file, fsyncs it, and only THEN calls the commit
 * callback with the highest fsynced offset of each partition. close() stops the thread after
 * a final write + fsync + commit.
 *
 * Config (flat JSON): {"path": "/var/lib/x/out.log", "flush_interval_ms": 100}
 * With offset_commit = "sink_controlled" Ferry installs the commit callback; otherwise the
 * sink still writes and fsyncs but commits nothing (Ferry commits by its own mode).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "iggy_connector.h"
#include "postcard.h"

#define MAX_PARTS 256

typedef struct {
    uint32_t stream_id, topic_id, partition_id;
    uint64_t offset;
} part_off;

typedef struct instance {
    uint32_t id;
    int fd;
    uint64_t flush_ms;
    iggy_commit_cb commit;
    pthread_t thread;
    pthread_mutex_t mu; /* guards buf, parts, stop, commit */
    pthread_cond_t cond;
    int stop;
    pc_writer buf;
    part_off parts[MAX_PARTS]; /* highest buffered offset per partition */
    int nparts;
    struct instance *next;
} instance;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static instance *reg;
static iggy_log_cb log_cb;

static void logf_(uint8_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void logf_(uint8_t level, const char *fmt, ...) {
    if (!log_cb) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
    static const char target[] = "committing_sink";
    log_cb(level, (const uint8_t *)target, sizeof target - 1, (const uint8_t *)msg, (size_t)n);
}

static instance *find(uint32_t id) {
    instance *in;
    pthread_mutex_lock(&reg_mu);
    for (in = reg; in && in->id != id; in = in->next) {}
    pthread_mutex_unlock(&reg_mu);
    return in;
}

/* Write and fsync what is buffered, then commit it. Called only by the flusher thread. */
static void flush(instance *in) {
    pthread_mutex_lock(&in->mu);
    pc_writer w = in->buf;
    memset(&in->buf, 0, sizeof in->buf);
    part_off parts[MAX_PARTS];
    int nparts = in->nparts;
    memcpy(parts, in->parts, sizeof(part_off) * (size_t)nparts);
    in->nparts = 0;
    iggy_commit_cb commit = in->commit;
    pthread_mutex_unlock(&in->mu);

    size_t off = 0;
    while (off < w.n) {
        ssize_t k = write(in->fd, w.p + off, w.n - off);
        if (k < 0) {
            if (errno == EINTR) continue;
            logf_(IGGY_LOG_ERROR, "write failed: errno %d; nothing committed", errno);
            pc_writer_free(&w);
            return; /* offsets not committed: Ferry redelivers after a restart */
        }
        off += (size_t)k;
    }
    int wrote = w.n > 0;
    pc_writer_free(&w);
    if (!wrote && nparts == 0) return;
    if (fsync(in->fd) != 0) {
        logf_(IGGY_LOG_ERROR, "fsync failed: errno %d; nothing committed", errno);
        return;
    }
    for (int i = 0; commit && i < nparts; i++) {
        int32_t rc = commit(in->id, parts[i].stream_id, parts[i].topic_id, parts[i].partition_id, parts[i].offset);
        if (rc != IGGY_COMMIT_OK)
            logf_(IGGY_LOG_WARN, "commit %u/%u/%u offset %llu returned %d", parts[i].stream_id,
                  parts[i].topic_id, parts[i].partition_id, (unsigned long long)parts[i].offset, rc);
    }
}

static void *flusher(void *arg) {
    instance *in = arg;
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(in->flush_ms % 1000) * 1000000L;
        ts.tv_sec += (time_t)(in->flush_ms / 1000) + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_mutex_lock(&in->mu);
        while (!in->stop && pthread_cond_timedwait(&in->cond, &in->mu, &ts) == 0) {}
        int stop = in->stop;
        pthread_mutex_unlock(&in->mu);
        flush(in);
        if (stop) return NULL;
    }
}

int32_t iggy_sink_open(uint32_t id, const uint8_t *cfg, size_t cfg_len, iggy_log_cb log) {
    if (!log_cb) log_cb = log;
    if (find(id)) return -1;
    char path[1024];
    uint64_t flush_ms = 100;
    if (!json_string(cfg, cfg_len, "path", path, sizeof path)) {
        logf_(IGGY_LOG_ERROR, "config needs \"path\"");
        return -1;
    }
    json_u64(cfg, cfg_len, "flush_interval_ms", &flush_ms);
    if (flush_ms == 0) flush_ms = 1;
    instance *in = calloc(1, sizeof *in);
    if (!in) return 1;
    in->id = id;
    in->flush_ms = flush_ms;
    in->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (in->fd < 0) {
        logf_(IGGY_LOG_ERROR, "open %s: errno %d", path, errno);
        free(in);
        return 1;
    }
    pthread_mutex_init(&in->mu, NULL);
    pthread_cond_init(&in->cond, NULL);
    if (pthread_create(&in->thread, NULL, flusher, in) != 0) {
        close(in->fd);
        free(in);
        return 1;
    }
    pthread_mutex_lock(&reg_mu);
    in->next = reg;
    reg = in;
    pthread_mutex_unlock(&reg_mu);
    logf_(IGGY_LOG_INFO, "committing sink %u writes to %s, fsync every %llu ms", id, path,
          (unsigned long long)flush_ms);
    return 0;
}

int32_t iggy_sink_set_commit_callback(uint32_t id, iggy_commit_cb cb) {
    instance *in = find(id);
    if (!in) return -1;
    pthread_mutex_lock(&in->mu);
    in->commit = cb;
    pthread_mutex_unlock(&in->mu);
    return 0;
}

int32_t iggy_sink_consume(uint32_t id, const uint8_t *tm, size_t tml, const uint8_t *mm, size_t mml,
                          const uint8_t *ms, size_t msl) {
    instance *in = find(id);
    if (!in) return -1;
    pc_reader r = pc_reader_new(tm, tml);
    size_t n;
    pc_bytes(&r, &n); /* stream name */
    pc_bytes(&r, &n); /* topic name */
    int has_ids = !r.err && pc_remaining(&r) > 0;
    uint32_t stream_id = has_ids ? pc_u32(&r) : 0, topic_id = has_ids ? pc_u32(&r) : 0;
    if (r.err) return -1;
    r = pc_reader_new(mm, mml);
    uint32_t partition_id = pc_u32(&r);
    pc_u64(&r); /* current_offset: the partition's high-water mark, not the batch end */
    pc_u32(&r); /* schema */
    if (r.err) return -1;

    r = pc_reader_new(ms, msl);
    pc_u32(&r); /* schema */
    uint64_t count = pc_u64(&r);
    int have_last = 0;
    uint64_t last = 0;
    pthread_mutex_lock(&in->mu);
    for (uint64_t i = 0; i < count && !r.err; i++) {
        uint64_t lo, hi;
        pc_u128(&r, &lo, &hi); /* id */
        uint64_t offset = pc_u64(&r);
        pc_u64(&r); /* checksum */
        pc_u64(&r); /* timestamp */
        pc_u64(&r); /* origin_timestamp */
        pc_bytes(&r, &n); /* headers blob */
        const uint8_t *payload = pc_bytes(&r, &n);
        if (r.err) break;
        pc_put(&in->buf, payload, n);
        pc_put_byte(&in->buf, '\n');
        last = offset;
        have_last = 1;
    }
    int err = r.err || in->buf.err;
    if (!err && have_last && has_ids) {
        int i;
        for (i = 0; i < in->nparts; i++)
            if (in->parts[i].stream_id == stream_id && in->parts[i].topic_id == topic_id &&
                in->parts[i].partition_id == partition_id)
                break;
        if (i == in->nparts && in->nparts < MAX_PARTS) {
            in->parts[i] = (part_off){stream_id, topic_id, partition_id, last};
            in->nparts++;
        } else if (i < in->nparts && last > in->parts[i].offset) {
            in->parts[i].offset = last;
        }
    }
    pthread_mutex_unlock(&in->mu);
    return err ? -1 : 0;
}

int32_t iggy_sink_close(uint32_t id) {
    pthread_mutex_lock(&reg_mu);
    instance **pp = &reg;
    while (*pp && (*pp)->id != id) pp = &(*pp)->next;
    instance *in = *pp;
    if (in) *pp = in->next;
    pthread_mutex_unlock(&reg_mu);
    if (!in) return -1;
    pthread_mutex_lock(&in->mu);
    in->stop = 1;
    pthread_cond_signal(&in->cond);
    pthread_mutex_unlock(&in->mu);
    pthread_join(in->thread, NULL); /* final write + fsync + commit happen here */
    close(in->fd);
    pc_writer_free(&in->buf);
    pthread_mutex_destroy(&in->mu);
    pthread_cond_destroy(&in->cond);
    free(in);
    return 0;
}

const char *iggy_sink_version(void) { return "0.1.0-committing-sink"; }
