/* source.c — a G4 source producing `count` messages "message-<n>" in batches of `batch`,
 * with the counter as its state (8 bytes, little-endian; opaque to the runtime).
 *
 * Protocol (one batch in flight): build a postcard ProducedMessages, call the send callback
 * with a new batch id; a non-zero return is a NACK. Otherwise wait for
 * iggy_source_batch_result(id, batch_id, ACK|NACK): ACK advances the counter, NACK resends
 * the same messages under a new batch id after a short back-off. The state sent with a
 * batch is the counter AFTER it, so a source reopened with that state continues there.
 *
 * Config (flat JSON): {"count": 100, "batch": 10}
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "iggy_connector.h"
#include "postcard.h"

typedef struct instance {
    uint32_t id;
    uint64_t next, count, batch;
    iggy_send_cb_v2 send;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int stop;
    uint64_t pending; /* batch id awaiting a result, 0 = none */
    int result;       /* -1 none yet, 0 ACK, 1 NACK */
    struct instance *next_in;
} instance;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static instance *reg;

static instance *find(uint32_t id) {
    instance *in;
    pthread_mutex_lock(&reg_mu);
    for (in = reg; in && in->id != id; in = in->next_in) {}
    pthread_mutex_unlock(&reg_mu);
    return in;
}

int32_t iggy_source_open(uint32_t id, const uint8_t *cfg, size_t cfg_len, const uint8_t *state,
                         size_t state_len, iggy_log_cb log) {
    (void)log;
    if (find(id)) return -1;
    instance *in = calloc(1, sizeof *in);
    if (!in) return 1;
    in->id = id;
    in->count = 10;
    in->batch = 1;
    json_u64(cfg, cfg_len, "count", &in->count);
    json_u64(cfg, cfg_len, "batch", &in->batch);
    if (in->batch == 0) in->batch = 1;
    if (state != NULL && state_len == 8)
        for (int i = 7; i >= 0; i--) in->next = in->next << 8 | state[i];
    pthread_mutex_init(&in->mu, NULL);
    pthread_cond_init(&in->cond, NULL);
    pthread_mutex_lock(&reg_mu);
    in->next_in = reg;
    reg = in;
    pthread_mutex_unlock(&reg_mu);
    return 0;
}

static void encode(instance *in, uint64_t from, uint64_t n, pc_writer *w) {
    pc_put_varint(w, 2); /* schema: text */
    pc_put_varint(w, n);
    for (uint64_t i = from; i < from + n; i++) {
        char payload[32];
        int len = snprintf(payload, sizeof payload, "message-%llu", (unsigned long long)i);
        pc_put_byte(w, 1);              /* id: Some */
        pc_put_u128(w, i + 1, 0);       /* ids 1.. (0 would mean "assign a random id") */
        pc_put_byte(w, 0);              /* checksum: None */
        pc_put_byte(w, 0);              /* timestamp: None */
        pc_put_byte(w, 0);              /* origin_timestamp: None */
        pc_put_byte(w, 0);              /* headers: None */
        pc_put_bytes(w, payload, (size_t)len);
    }
    uint8_t st[8];
    uint64_t after = from + n;
    for (int i = 0; i < 8; i++) st[i] = (uint8_t)(after >> (8 * i));
    pc_put_byte(w, 1); /* state: Some */
    pc_put_bytes(w, st, sizeof st);
    (void)in;
}

static void *produce(void *arg) {
    instance *in = arg;
    uint64_t batch_id = 0;
    struct timespec backoff = {0, 10 * 1000 * 1000};
    for (;;) {
        pthread_mutex_lock(&in->mu);
        int stop = in->stop;
        uint64_t from = in->next;
        pthread_mutex_unlock(&in->mu);
        if (stop || from >= in->count) return NULL;
        uint64_t n = in->count - from < in->batch ? in->count - from : in->batch;
        pc_writer w = {0};
        encode(in, from, n, &w);
        if (w.err) { pc_writer_free(&w); return NULL; }
        batch_id++;
        pthread_mutex_lock(&in->mu);
        in->pending = batch_id;
        in->result = -1;
        pthread_mutex_unlock(&in->mu);
        int32_t rc = in->send(in->id, batch_id, w.p, w.n);
        pc_writer_free(&w);
        pthread_mutex_lock(&in->mu);
        if (rc != 0) in->result = 1;
        while (in->result < 0 && !in->stop) pthread_cond_wait(&in->cond, &in->mu);
        int acked = in->result == 0;
        in->pending = 0;
        if (acked) in->next = from + n;
        stop = in->stop;
        pthread_mutex_unlock(&in->mu);
        if (stop) return NULL;
        if (!acked) nanosleep(&backoff, NULL);
    }
}

int32_t iggy_source_handle_v2(uint32_t id, iggy_send_cb_v2 cb) {
    instance *in = find(id);
    if (!in || in->started) return -1;
    in->send = cb;
    if (pthread_create(&in->thread, NULL, produce, in) != 0) return -1;
    in->started = 1;
    return 0;
}

int32_t iggy_source_batch_result(uint32_t id, uint64_t batch_id, uint8_t result) {
    instance *in = find(id);
    if (!in) return -1;
    pthread_mutex_lock(&in->mu);
    int ok = in->pending != 0 && in->pending == batch_id && in->result < 0 && result <= 1;
    if (in->pending != 0 && in->pending == batch_id && in->result < 0) {
        in->result = result == 0 ? 0 : 1;
        pthread_cond_signal(&in->cond);
    }
    pthread_mutex_unlock(&in->mu);
    return ok ? 0 : -1;
}

int32_t iggy_source_close(uint32_t id) {
    pthread_mutex_lock(&reg_mu);
    instance **pp = &reg;
    while (*pp && (*pp)->id != id) pp = &(*pp)->next_in;
    instance *in = *pp;
    if (in) *pp = in->next_in;
    pthread_mutex_unlock(&reg_mu);
    if (!in) return -1;
    pthread_mutex_lock(&in->mu);
    in->stop = 1;
    pthread_cond_broadcast(&in->cond);
    pthread_mutex_unlock(&in->mu);
    if (in->started) pthread_join(in->thread, NULL);
    pthread_mutex_destroy(&in->mu);
    pthread_cond_destroy(&in->cond);
    free(in);
    return 0;
}

const char *iggy_source_version(void) { return "0.1.0-counter-source"; }
