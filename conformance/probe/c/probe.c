/* probe.c — the conformance suite's probe sink: a native Iggy connector plugin that records
 * what a runtime delivers to it, and misbehaves on request.
 *
 * Self-contained (the suite compiles it from an embedded copy wherever `ferry conformance`
 * runs, so it cannot include the repository's headers); the ABI it implements is the one of
 * include/iggy_connector.h. It is a test instrument, not an example: see
 * examples/plugins/c for those.
 *
 * plugin_config (flat JSON, every field optional but "record"):
 *   record      path of the record file (appended, fsynced before consume returns)
 *   fail_batch  the N-th consume call of this instance (1-based) fails ...
 *   fail_times  ... this many times in a row (consume returns 1 without recording)
 *   abort_at    abort() when the M-th message (1-based, counted per process) arrives,
 *               before its batch is recorded
 *   sleep_ms    sleep this long at the start of every consume (a batch in flight)
 *   commit      "none" (default) | "immediate": commit each batch's last offset through
 *               the commit callback once it is recorded | "codes": the same, and on the
 *               first batch also try a stale, an out-of-range, a foreign-partition and an
 *               unknown-id commit, recording each return code | "late": commit each
 *               batch's last offset only when the next batch of its partition is recorded
 *               (the last batch is never committed) | "order": commit each batch's last
 *               offset, then its first (lower) one, recording both codes | "afterstop":
 *               "immediate", and close starts a thread that keeps the callback and calls it
 *               again with the last committed offset every 5ms (up to 5s) until the code
 *               is neither 0 nor -2 (the instance is gone), recording that code
 *
 * Record lines (one per event, space separated; pid is the recording process's, so that
 * a record shared by several runtime processes says which one got each message):
 *   O id pid             instance opened          X id        instance closed
 *   K                    commit callback installed
 *   E p first count      consume entered with a batch of partition p
 *   F p first            consume returned 1 (fail_batch)
 *   M p offset hash pid  one message recorded (hash: FNV-1a 64 of the payload, hex)
 *   C kind rc            commit callback return code (kind: ok, stale, range, foreign, unknown,
 *                        high, low, afterstop)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*log_cb)(uint8_t, const uint8_t *, size_t, const uint8_t *, size_t);
typedef int32_t (*commit_cb)(uint32_t, uint32_t, uint32_t, uint32_t, uint64_t);

/* ---- postcard reading (sticky error) ---- */
typedef struct {
    const uint8_t *p;
    size_t n, off;
    int err;
} rd;

static uint64_t varint(rd *r, int max) {
    uint64_t v = 0;
    if (r->err) return 0;
    for (int i = 0; i < max; i++) {
        if (r->off >= r->n) break;
        uint8_t c = r->p[r->off++];
        if (i < 10) v |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) return v;
    }
    r->err = 1;
    return 0;
}
static const uint8_t *bytes(rd *r, size_t *n) {
    uint64_t l = varint(r, 10);
    if (r->err || l > r->n - r->off) {
        r->err = 1;
        *n = 0;
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += (size_t)l;
    *n = (size_t)l;
    return p;
}

#include "probe_json.h"

/* ---- instances ---- */
typedef struct inst {
    uint32_t id;
    int fd;
    int pid;
    uint64_t fail_batch, fail_times, failed, calls, sleep_ms;
    int commit_mode; /* 0 none, 1 immediate, 2 codes, 3 late, 4 order, 5 afterstop */
    int committed;   /* a commit was accepted: the fields below name it */
    uint32_t c_stream, c_topic, c_part;
    uint64_t c_off;
    uint32_t late_part[64];
    uint64_t late_off[64];
    int late_n;
    int codes_done;
    commit_cb commit;
    pthread_mutex_t mu; /* serialises record writes and counters */
    struct inst *next;
} inst;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static inst *reg;
static uint64_t abort_at, seen; /* per process, guarded by reg_mu */

static inst *find(uint32_t id) {
    pthread_mutex_lock(&reg_mu);
    inst *in = reg;
    while (in && in->id != id) in = in->next;
    pthread_mutex_unlock(&reg_mu);
    return in;
}

static int put(int fd, const char *s, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, s, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        s += k;
        n -= (size_t)k;
    }
    return 0;
}
static void line(inst *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void line(inst *in, const char *fmt, ...) {
    char b[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof b) put(in->fd, b, (size_t)n);
}

int32_t iggy_sink_open(uint32_t id, const uint8_t *cfg, size_t cfg_len, log_cb log) {
    (void)log;
    if (find(id)) return -1;
    char *c = malloc(cfg_len + 1);
    if (!c) return 1;
    memcpy(c, cfg, cfg_len);
    c[cfg_len] = 0;
    char path[2048], mode[32] = "none";
    if (!jstr(c, "record", path, sizeof path)) {
        free(c);
        return -1;
    }
    jstr(c, "commit", mode, sizeof mode);
    inst *in = calloc(1, sizeof *in);
    if (!in) {
        free(c);
        return 1;
    }
    in->id = id;
    in->fail_batch = jnum(c, "fail_batch", 0);
    in->fail_times = jnum(c, "fail_times", 1);
    in->sleep_ms = jnum(c, "sleep_ms", 0);
    in->commit_mode = strcmp(mode, "immediate") == 0 ? 1 : strcmp(mode, "codes") == 0 ? 2 : strcmp(mode, "late") == 0 ? 3
                     : strcmp(mode, "order") == 0 ? 4 : strcmp(mode, "afterstop") == 0 ? 5 : 0;
    uint64_t at = jnum(c, "abort_at", 0);
    free(c);
    in->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (in->fd < 0) {
        free(in);
        return 1;
    }
    pthread_mutex_init(&in->mu, NULL);
    in->pid = (int)getpid();
    line(in, "O %u %d\n", id, in->pid);
    fsync(in->fd);
    pthread_mutex_lock(&reg_mu);
    if (at) abort_at = at;
    in->next = reg;
    reg = in;
    pthread_mutex_unlock(&reg_mu);
    return 0;
}

int32_t iggy_sink_set_commit_callback(uint32_t id, commit_cb cb) {
    inst *in = find(id);
    if (!in) return -1;
    pthread_mutex_lock(&in->mu);
    in->commit = cb;
    line(in, "K\n");
    fsync(in->fd);
    pthread_mutex_unlock(&in->mu);
    return 0;
}

static uint64_t fnv(const uint8_t *p, size_t n) {
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

int32_t iggy_sink_consume(uint32_t id, const uint8_t *tm, size_t tml, const uint8_t *mm, size_t mml,
                          const uint8_t *ms, size_t msl) {
    inst *in = find(id);
    if (!in) return -1;
    rd r = {tm, tml, 0, 0};
    size_t n;
    bytes(&r, &n);
    bytes(&r, &n);
    int has_ids = !r.err && r.off < r.n;
    uint32_t stream = has_ids ? (uint32_t)varint(&r, 5) : 0, topic = has_ids ? (uint32_t)varint(&r, 5) : 0;
    rd m = {mm, mml, 0, 0};
    uint32_t part = (uint32_t)varint(&m, 5);
    if (r.err || m.err) return -1;

    rd b = {ms, msl, 0, 0};
    varint(&b, 5);
    uint64_t count = varint(&b, 10);
    if (b.err) return -1;
    /* first offset: peek the first message without consuming the reader */
    uint64_t first = 0;
    if (count > 0) {
        rd p = b;
        varint(&p, 19);
        first = varint(&p, 10);
    }

    pthread_mutex_lock(&in->mu);
    in->calls++;
    line(in, "E %u %llu %llu\n", part, (unsigned long long)first, (unsigned long long)count);
    int fail = in->fail_batch && in->calls >= in->fail_batch && in->failed < in->fail_times;
    if (fail) {
        in->failed++;
        line(in, "F %u %llu\n", part, (unsigned long long)first);
        fsync(in->fd);
    }
    pthread_mutex_unlock(&in->mu);
    if (fail) return 1;
    if (in->sleep_ms) {
        struct timespec ts = {(time_t)(in->sleep_ms / 1000), (long)(in->sleep_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    pthread_mutex_lock(&reg_mu);
    seen += count;
    int die = abort_at && seen >= abort_at;
    pthread_mutex_unlock(&reg_mu);
    if (die) abort();

    size_t cap = (size_t)count * 80 + 1, len = 0;
    char *out = malloc(cap);
    if (!out) return 1;
    uint64_t last = 0;
    for (uint64_t i = 0; i < count && !b.err; i++) {
        varint(&b, 19); /* id u128 */
        uint64_t off = varint(&b, 10);
        varint(&b, 10); /* checksum */
        varint(&b, 10); /* timestamp */
        varint(&b, 10); /* origin timestamp */
        bytes(&b, &n);  /* headers */
        const uint8_t *pl = bytes(&b, &n);
        if (b.err) break;
        int k = snprintf(out + len, cap - len, "M %u %llu %016llx %d\n", part, (unsigned long long)off,
                         (unsigned long long)fnv(pl, n), in->pid);
        if (k > 0) len += (size_t)k;
        last = off;
    }
    if (b.err) {
        free(out);
        return -1;
    }
    pthread_mutex_lock(&in->mu);
    int werr = put(in->fd, out, len) || fsync(in->fd);
    free(out);
    if (!werr && count > 0 && in->commit && has_ids && in->commit_mode == 3) {
        int i = 0;
        while (i < in->late_n && in->late_part[i] != part) i++;
        if (i < in->late_n) {
            line(in, "C late %d\n", in->commit(in->id, stream, topic, part, in->late_off[i]));
            fsync(in->fd);
        } else if (i < 64) {
            in->late_part[i] = part;
            in->late_n++;
        }
        if (i < 64) in->late_off[i] = last;
    } else if (!werr && count > 0 && in->commit && has_ids && in->commit_mode == 4) {
        line(in, "C high %d\n", in->commit(in->id, stream, topic, part, last));
        if (count >= 2) line(in, "C low %d\n", in->commit(in->id, stream, topic, part, first));
        fsync(in->fd);
    } else if (!werr && count > 0 && in->commit && has_ids && in->commit_mode) {
        int32_t rc = in->commit(in->id, stream, topic, part, last);
        line(in, "C ok %d\n", rc);
        if (rc == 0) {
            in->committed = 1;
            in->c_stream = stream, in->c_topic = topic, in->c_part = part, in->c_off = last;
        }
        if (in->commit_mode == 2 && !in->codes_done) {
            in->codes_done = 1;
            line(in, "C stale %d\n", in->commit(in->id, stream, topic, part, last));
            line(in, "C range %d\n", in->commit(in->id, stream, topic, part, last + 1000000));
            line(in, "C foreign %d\n", in->commit(in->id, stream, topic, part + 1000, last));
            line(in, "C unknown %d\n", in->commit(in->id + 1000000, stream, topic, part, last));
        }
        fsync(in->fd);
    }
    pthread_mutex_unlock(&in->mu);
    return werr ? 1 : 0;
}

/* afterstop: what the thread started by close keeps of the instance. */
typedef struct {
    commit_cb cb;
    uint32_t id, stream, topic, part;
    uint64_t off;
    int fd;
} afterstop;

static void *afterstop_run(void *arg) {
    afterstop *a = arg;
    int32_t rc = 0;
    for (int i = 0; i < 1000; i++) {
        rc = a->cb(a->id, a->stream, a->topic, a->part, a->off);
        if (rc != 0 && rc != -2) break;
        struct timespec ts = {0, 5000000L};
        nanosleep(&ts, NULL);
    }
    char b[64];
    int n = snprintf(b, sizeof b, "C afterstop %d\n", rc);
    if (n > 0) put(a->fd, b, (size_t)n);
    fsync(a->fd);
    close(a->fd);
    free(a);
    return NULL;
}

int32_t iggy_sink_close(uint32_t id) {
    pthread_mutex_lock(&reg_mu);
    inst **pp = &reg;
    while (*pp && (*pp)->id != id) pp = &(*pp)->next;
    inst *in = *pp;
    if (in) *pp = in->next;
    pthread_mutex_unlock(&reg_mu);
    if (!in) return -1;
    line(in, "X %u\n", id);
    fsync(in->fd);
    if (in->commit_mode == 5 && in->commit && in->committed) {
        afterstop *a = malloc(sizeof *a);
        pthread_t t;
        if (a) {
            *a = (afterstop){in->commit, in->id, in->c_stream, in->c_topic, in->c_part, in->c_off, dup(in->fd)};
            if (a->fd < 0 || pthread_create(&t, NULL, afterstop_run, a) != 0) {
                if (a->fd >= 0) close(a->fd);
                free(a);
            } else {
                pthread_detach(t);
            }
        }
    }
    close(in->fd);
    pthread_mutex_destroy(&in->mu);
    free(in);
    return 0;
}

const char *iggy_sink_version(void) { return "0.1.0-ferry-conformance-probe"; }
