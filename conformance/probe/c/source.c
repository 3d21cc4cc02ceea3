/* source.c — the conformance suite's probe source: a native Iggy source plugin (the G4 ABI:
 * iggy_source_handle_v2 and iggy_source_batch_result) that produces numbered JSON messages,
 * keeps its cursor in the state the runtime saves, and records what the runtime does with
 * every batch.
 *
 * Self-contained like probe.c (the suite compiles it from an embedded copy). It behaves like
 * the official SDK's source loop: one batch in flight; the runtime's result, a failed send
 * callback or 30 s (result_timeout_ms) without a result decide it; a NACK resends the same messages after
 * 100 ms × 2^(n-1) (at most 5 s); the 5th NACK in a row stops the loop for good.
 *
 * plugin_config (flat JSON, every field optional but "record"):
 *   record        path of the record file (appended, fsynced)
 *   total         messages to produce in all: sequence numbers 0 .. total-1 (default 1000)
 *   batch         messages per batch (default 50)
 *   poison_every  K: sequence numbers n with n % K == K-1 get a payload that is not JSON
 *   interval_ms   pause after every ACKed batch (default 0)
 *   result_timeout_ms  how long to wait for a batch's result before the NACK (default 30000,
 *                 the SDK's)
 *   result_timeout_once  1: result_timeout_ms holds until its first timeout, then the SDK's
 *                 30 s does, so a scenario that provokes one timeout is not failed by a
 *                 send that is merely slow after it (a loaded machine)
 *
 * Payloads: {"seq":N} (schema json); a poison one is `not json N`. No ids: the runtime (or
 * the Iggy client) assigns them.
 *
 * State: the next sequence number, 8 bytes little-endian, handed to the runtime with every
 * batch (the cursor after that batch); open resumes there.
 *
 * Record lines (one per event, space separated; us = CLOCK_REALTIME in µs):
 *   O id next            opened, resuming at sequence number next
 *   S id batch first count      a batch about to be handed to the send callback
 *   B id batch rc        the send callback returned rc for it
 *   A id batch first count us   the batch was ACKed (us: when iggy_source_batch_result came)
 *   N id batch first count why  the batch was NACKed (why: runtime, callback, timeout, close)
 *   R id batch result rc        a call of iggy_source_batch_result and what it returned
 *   Z id                 the loop stopped after 5 NACKs in a row
 *   D id next            every message was produced and ACKed
 *   X id                 closed
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*log_cb)(uint8_t, const uint8_t *, size_t, const uint8_t *, size_t);
typedef int32_t (*send_cb)(uint32_t, uint64_t, const uint8_t *, size_t);

#include "probe_json.h"

/* The official SDK's wait for a batch's result. */
#define SDK_RESULT_TIMEOUT_MS 30000

/* ---- postcard writing ---- */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    int err;
} wr;

static void wbyte(wr *w, uint8_t b) {
    if (w->err) return;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        uint8_t *p = realloc(w->p, cap);
        if (!p) {
            w->err = 1;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    w->p[w->n++] = b;
}
static void wvarint(wr *w, uint64_t v) {
    while (v >= 0x80) {
        wbyte(w, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    wbyte(w, (uint8_t)v);
}
static void wbytes(wr *w, const void *p, size_t n) {
    wvarint(w, n);
    for (size_t i = 0; i < n; i++) wbyte(w, ((const uint8_t *)p)[i]);
}

/* ---- instances ---- */
typedef struct inst {
    uint32_t id;
    int fd;
    uint64_t total, batch, poison_every, interval_ms, result_timeout_ms, result_timeout_once;
    uint64_t next;      /* the next sequence number to produce (advanced by ACKs) */
    uint64_t batch_ids; /* batch ids handed out so far */
    uint64_t pending;   /* the batch id waiting for its result; 0 = none */
    int result;         /* -1 none yet, 0 ACK, 1 NACK */
    uint64_t result_us; /* when the result came */
    int stop, started;
    send_cb send;
    pthread_t thread;
    pthread_mutex_t mu; /* guards the fields above and record writes */
    pthread_cond_t cv;
    struct inst *link;
} inst;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static inst *reg;

static inst *find(uint32_t id) {
    pthread_mutex_lock(&reg_mu);
    inst *in = reg;
    while (in && in->id != id) in = in->link;
    pthread_mutex_unlock(&reg_mu);
    return in;
}

static void line(inst *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(inst *in, const char *fmt, ...) {
    char b[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    const char *s = b;
    while (n > 0 && (size_t)n < sizeof b) {
        ssize_t k = write(in->fd, s, (size_t)n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return;
        }
        s += k;
        n -= (int)k;
    }
    fsync(in->fd);
}

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* deadline is the CLOCK_REALTIME moment ms from now (condition variables wait on it). */
static struct timespec deadline(uint64_t ms) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)(ms / 1000);
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    return dl;
}

/* wait_ms waits on the instance's condition variable until ms have passed or the
 * instance is stopping; it returns the stop flag. Called with in->mu held. */
static int wait_ms(inst *in, uint64_t ms) {
    struct timespec dl = deadline(ms);
    while (!in->stop && pthread_cond_timedwait(&in->cv, &in->mu, &dl) != ETIMEDOUT) {}
    return in->stop;
}

int32_t iggy_source_open(uint32_t id, const uint8_t *cfg, size_t cfg_len, const uint8_t *state, size_t state_len,
                         log_cb log) {
    (void)log;
    if (find(id)) return -1;
    char *c = malloc(cfg_len + 1);
    if (!c) return 1;
    memcpy(c, cfg, cfg_len);
    c[cfg_len] = 0;
    char path[2048];
    if (!jstr(c, "record", path, sizeof path)) {
        free(c);
        return -1;
    }
    inst *in = calloc(1, sizeof *in);
    if (!in) {
        free(c);
        return 1;
    }
    in->id = id;
    in->total = jnum(c, "total", 1000);
    in->batch = jnum(c, "batch", 50);
    in->poison_every = jnum(c, "poison_every", 0);
    in->interval_ms = jnum(c, "interval_ms", 0);
    in->result_timeout_ms = jnum(c, "result_timeout_ms", SDK_RESULT_TIMEOUT_MS);
    in->result_timeout_once = jnum(c, "result_timeout_once", 0);
    free(c);
    if (in->batch == 0) in->batch = 1;
    if (state && state_len == 8) {
        for (int i = 7; i >= 0; i--) in->next = in->next << 8 | state[i];
    } else if (state && state_len != 0) {
        free(in);
        return 1; /* not a state this probe saved */
    }
    in->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (in->fd < 0) {
        free(in);
        return 1;
    }
    pthread_mutex_init(&in->mu, NULL);
    pthread_cond_init(&in->cv, NULL);
    in->result = -1;
    line(in, "O %u %llu\n", id, (unsigned long long)in->next);
    pthread_mutex_lock(&reg_mu);
    in->link = reg;
    reg = in;
    pthread_mutex_unlock(&reg_mu);
    return 0;
}

/* encode builds the ProducedMessages of [first, first+count) with the state first+count. */
static int encode(inst *in, uint64_t first, uint64_t count, wr *w) {
    wvarint(w, 0); /* schema json */
    wvarint(w, count);
    for (uint64_t s = first; s < first + count; s++) {
        for (int i = 0; i < 5; i++) wbyte(w, 0); /* id, checksum, timestamp, origin, headers: None */
        char pl[64];
        int n = in->poison_every && s % in->poison_every == in->poison_every - 1
                    ? snprintf(pl, sizeof pl, "not json %llu", (unsigned long long)s)
                    : snprintf(pl, sizeof pl, "{\"seq\":%llu}", (unsigned long long)s);
        wbytes(w, pl, (size_t)n);
    }
    uint8_t st[8];
    uint64_t next = first + count;
    for (int i = 0; i < 8; i++) st[i] = (uint8_t)(next >> (8 * i));
    wbyte(w, 1);
    wbytes(w, st, sizeof st);
    return w->err ? -1 : 0;
}

static void *run(void *arg) {
    inst *in = arg;
    int nacks = 0;
    pthread_mutex_lock(&in->mu);
    while (!in->stop) {
        if (in->next >= in->total) {
            line(in, "D %u %llu\n", in->id, (unsigned long long)in->next);
            while (!in->stop) pthread_cond_wait(&in->cv, &in->mu);
            break;
        }
        uint64_t first = in->next, count = in->total - first;
        if (count > in->batch) count = in->batch;
        wr w = {0};
        if (encode(in, first, count, &w) != 0) {
            free(w.p);
            break;
        }
        uint64_t bid = ++in->batch_ids;
        in->pending = bid;
        in->result = -1;
        line(in, "S %u %llu %llu %llu\n", in->id, (unsigned long long)bid, (unsigned long long)first,
             (unsigned long long)count);
        pthread_mutex_unlock(&in->mu);
        int32_t rc = in->send(in->id, bid, w.p, w.n);
        free(w.p);
        pthread_mutex_lock(&in->mu);
        line(in, "B %u %llu %d\n", in->id, (unsigned long long)bid, rc);
        const char *why = "callback";
        if (rc == 0) {
            struct timespec dl = deadline(in->result_timeout_ms);
            while (in->result < 0 && !in->stop && pthread_cond_timedwait(&in->cv, &in->mu, &dl) != ETIMEDOUT) {}
            why = in->result == 1 ? "runtime" : in->result == 0 ? "" : in->stop ? "close" : "timeout";
            if (in->result < 0 && !in->stop && in->result_timeout_once) in->result_timeout_ms = SDK_RESULT_TIMEOUT_MS;
        }
        int acked = rc == 0 && in->result == 0;
        in->pending = 0;
        if (acked) {
            line(in, "A %u %llu %llu %llu %llu\n", in->id, (unsigned long long)bid, (unsigned long long)first,
                 (unsigned long long)count, (unsigned long long)in->result_us);
            in->next = first + count;
            nacks = 0;
            if (in->interval_ms && wait_ms(in, in->interval_ms)) break;
            continue;
        }
        line(in, "N %u %llu %llu %llu %s\n", in->id, (unsigned long long)bid, (unsigned long long)first,
             (unsigned long long)count, why);
        if (in->stop) break;
        if (++nacks >= 5) {
            line(in, "Z %u\n", in->id);
            break;
        }
        uint64_t backoff = 100u << (nacks - 1);
        if (wait_ms(in, backoff > 5000 ? 5000 : backoff)) break;
    }
    pthread_mutex_unlock(&in->mu);
    return NULL;
}

int32_t iggy_source_handle_v2(uint32_t id, send_cb cb) {
    inst *in = find(id);
    if (!in) return -1;
    pthread_mutex_lock(&in->mu);
    if (in->started) {
        pthread_mutex_unlock(&in->mu);
        return -1;
    }
    in->send = cb;
    in->started = pthread_create(&in->thread, NULL, run, in) == 0;
    int ok = in->started;
    pthread_mutex_unlock(&in->mu);
    return ok ? 0 : -1;
}

int32_t iggy_source_batch_result(uint32_t id, uint64_t batch_id, uint8_t result) {
    inst *in = find(id);
    if (!in) return -1;
    pthread_mutex_lock(&in->mu);
    int32_t rc = -1;
    if (in->pending != 0 && in->pending == batch_id && in->result < 0) {
        in->result = result == 0 ? 0 : 1;
        in->result_us = now_us();
        rc = result <= 1 ? 0 : -1;
        pthread_cond_broadcast(&in->cv);
    }
    line(in, "R %u %llu %u %d\n", id, (unsigned long long)batch_id, result, rc);
    pthread_mutex_unlock(&in->mu);
    return rc;
}

int32_t iggy_source_close(uint32_t id) {
    pthread_mutex_lock(&reg_mu);
    inst **pp = &reg;
    while (*pp && (*pp)->id != id) pp = &(*pp)->link;
    inst *in = *pp;
    if (in) *pp = in->link;
    pthread_mutex_unlock(&reg_mu);
    if (!in) return -1;
    pthread_mutex_lock(&in->mu);
    in->stop = 1;
    pthread_cond_broadcast(&in->cv);
    int started = in->started;
    pthread_mutex_unlock(&in->mu);
    if (started) pthread_join(in->thread, NULL);
    line(in, "X %u\n", id);
    close(in->fd);
    pthread_cond_destroy(&in->cv);
    pthread_mutex_destroy(&in->mu);
    free(in);
    return 0;
}

const char *iggy_source_version(void) { return "0.1.0-ferry-conformance-probe-source"; }
