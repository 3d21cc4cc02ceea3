/* latedelivery.c — a broken runtime's half for broken_test.go: a plugin that wraps the
 * real probe ($LIAR_REAL_PLUGIN, loaded with dlopen) and acknowledges every batch at once
 * (consume returns 0, so the runtime commits it) but hands it to the probe only later: a
 * batch of partition p waits until the probe's record shows a message of p recorded by
 * another process (the partition moved there), or until close. To the suite that is a
 * runtime that keeps delivering a partition after the rebalance moved it away.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*log_cb)(uint8_t, const uint8_t *, size_t, const uint8_t *, size_t);
typedef int32_t (*consume_fn)(uint32_t, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, size_t);

static int32_t (*real_open)(uint32_t, const uint8_t *, size_t, log_cb);
static consume_fn real_consume;
static int32_t (*real_close)(uint32_t);
static const char *(*real_version)(void);

/* One held batch: copies of consume's three buffers. */
typedef struct held {
    uint32_t id, part;
    uint8_t *buf[3];
    size_t len[3];
    struct held *next;
} held;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static held *queue, **tail = &queue;
static char record[2048];
static int watching;

__attribute__((constructor)) static void load(void) {
    const char *path = getenv("LIAR_REAL_PLUGIN");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        fprintf(stderr, "latedelivery: cannot load $LIAR_REAL_PLUGIN (%s): %s\n", path ? path : "unset", dlerror());
        return;
    }
    real_open = (int32_t (*)(uint32_t, const uint8_t *, size_t, log_cb))dlsym(h, "iggy_sink_open");
    real_consume = (consume_fn)dlsym(h, "iggy_sink_consume");
    real_close = (int32_t (*)(uint32_t))dlsym(h, "iggy_sink_close");
    real_version = (const char *(*)(void))dlsym(h, "iggy_sink_version");
}

/* deliver hands the held batches to the probe: all of them, or (moved != NULL) those
 * whose partition moved[part] says moved. mu must be held. */
static void deliver(const char *moved) {
    held **pp = &queue;
    while (*pp) {
        held *b = *pp;
        if (moved && (b->part >= 64 || !moved[b->part])) {
            pp = &b->next;
            continue;
        }
        real_consume(b->id, b->buf[0], b->len[0], b->buf[1], b->len[1], b->buf[2], b->len[2]);
        *pp = b->next;
        for (int i = 0; i < 3; i++) free(b->buf[i]);
        free(b);
    }
    tail = pp;
    while (*tail) tail = &(*tail)->next;
}

/* watch reads the record every 5ms: a message line "M p off hash pid" of another pid
 * marks p as moved, and its held batches are delivered. */
static void *watch(void *arg) {
    (void)arg;
    int self = (int)getpid();
    for (;;) {
        char moved[64] = {0};
        FILE *f = fopen(record, "r");
        char l[256];
        while (f && fgets(l, sizeof l, f)) {
            unsigned p;
            unsigned long long off;
            char hash[32];
            int pid;
            if (sscanf(l, "M %u %llu %31s %d", &p, &off, hash, &pid) == 4 && pid != self && p < 64) moved[p] = 1;
        }
        if (f) fclose(f);
        pthread_mutex_lock(&mu);
        deliver(moved);
        pthread_mutex_unlock(&mu);
        struct timespec ts = {0, 5000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int32_t iggy_sink_open(uint32_t id, const uint8_t *cfg, size_t len, log_cb log) {
    if (!real_open) return -1;
    const char *key = "\"record\":\"";
    const uint8_t *at = memmem(cfg, len, key, strlen(key));
    pthread_mutex_lock(&mu);
    if (at && !watching) {
        const char *p = (const char *)at + strlen(key);
        size_t i = 0;
        while (p < (const char *)cfg + len && *p != '"' && i + 1 < sizeof record) record[i++] = *p++;
        record[i] = 0;
        pthread_t t;
        watching = pthread_create(&t, NULL, watch, NULL) == 0;
        if (watching) pthread_detach(t);
    }
    pthread_mutex_unlock(&mu);
    return real_open(id, cfg, len, log);
}

int32_t iggy_sink_consume(uint32_t id, const uint8_t *tm, size_t tml, const uint8_t *mm, size_t mml,
                          const uint8_t *ms, size_t msl) {
    held *b = calloc(1, sizeof *b);
    if (!b || mml == 0) {
        free(b);
        return 1;
    }
    const uint8_t *src[3] = {tm, mm, ms};
    size_t n[3] = {tml, mml, msl};
    for (int i = 0; i < 3; i++) {
        b->buf[i] = malloc(n[i] ? n[i] : 1);
        if (!b->buf[i]) {
            while (i-- > 0) free(b->buf[i]);
            free(b);
            return 1;
        }
        memcpy(b->buf[i], src[i], n[i]);
        b->len[i] = n[i];
    }
    b->id = id;
    for (int i = 0, shift = 0; i < 5 && i < (int)mml; i++, shift += 7) { /* partition_id: a varint */
        b->part |= (uint32_t)(mm[i] & 0x7f) << shift;
        if (!(mm[i] & 0x80)) break;
    }
    pthread_mutex_lock(&mu);
    *tail = b;
    tail = &b->next;
    pthread_mutex_unlock(&mu);
    return 0;
}

int32_t iggy_sink_close(uint32_t id) {
    if (!real_close) return -1;
    pthread_mutex_lock(&mu);
    deliver(NULL);
    pthread_mutex_unlock(&mu);
    return real_close(id);
}

const char *iggy_sink_version(void) { return real_version ? real_version() : "latedelivery"; }
