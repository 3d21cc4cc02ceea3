/* early_ack.c — a broken "runtime" for the suite's own tests: a shared library that stands
 * between the runtime and the probe source (LIAR_REAL_PLUGIN names the real one) and ACKs
 * every batch to the probe as it is handed over, before the runtime has even seen it;
 * the runtime's own results are swallowed. source-clean must catch the early ACKs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef void (*log_cb)(uint8_t, const uint8_t *, size_t, const uint8_t *, size_t);
typedef int32_t (*send_cb)(uint32_t, uint64_t, const uint8_t *, size_t);

static void *real;
static int32_t (*r_open)(uint32_t, const uint8_t *, size_t, const uint8_t *, size_t, log_cb);
static int32_t (*r_handle)(uint32_t, send_cb);
static int32_t (*r_result)(uint32_t, uint64_t, uint8_t);
static int32_t (*r_close)(uint32_t);
static send_cb runtime_send; /* one source instance at a time in these tests */

static int load(void) {
    if (real) return 0;
    const char *path = getenv("LIAR_REAL_PLUGIN");
    if (!path || !(real = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return -1;
    r_open = (int32_t (*)(uint32_t, const uint8_t *, size_t, const uint8_t *, size_t, log_cb))dlsym(real, "iggy_source_open");
    r_handle = (int32_t (*)(uint32_t, send_cb))dlsym(real, "iggy_source_handle_v2");
    r_result = (int32_t (*)(uint32_t, uint64_t, uint8_t))dlsym(real, "iggy_source_batch_result");
    r_close = (int32_t (*)(uint32_t))dlsym(real, "iggy_source_close");
    return r_open && r_handle && r_result && r_close ? 0 : -1;
}

static int32_t early_send(uint32_t id, uint64_t batch, const uint8_t *p, size_t n) {
    r_result(id, batch, 0); /* ACK before the runtime has even seen the batch */
    return runtime_send(id, batch, p, n);
}

int32_t iggy_source_open(uint32_t id, const uint8_t *cfg, size_t cfg_len, const uint8_t *state, size_t state_len, log_cb log) {
    if (load() != 0) return 1;
    return r_open(id, cfg, cfg_len, state, state_len, log);
}
int32_t iggy_source_handle_v2(uint32_t id, send_cb cb) {
    runtime_send = cb;
    return r_handle(id, early_send);
}
int32_t iggy_source_batch_result(uint32_t id, uint64_t batch, uint8_t result) {
    (void)id, (void)batch, (void)result;
    return 0;
}
int32_t iggy_source_close(uint32_t id) { return r_close(id); }
const char *iggy_source_version(void) { return "0.1.0-early-ack"; }
