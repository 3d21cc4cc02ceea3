/* hang.c — test-only plugin for tests/native: a plugin that hangs.
 * Config {"out": "<file>", "release": "<file>"}. The sink's iggy_sink_consume, and the
 * source's iggy_source_close, block until the release file exists (checked every
 * millisecond). One line per event is appended to out:
 *   open ID | consume ID blocked=N | close ID blocked=N (N: calls blocked at once, this
 *   one included) | returned ID | close ID (the sink's close, which does not block)
 * The G4 source produces nothing. Globals outlive instances: the library is loaded once
 * per process. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "iggy_connector.h"
#include "postcard.h"

static char out_path[1024], release_path[1024];
static int blocked;

static void note(const char *what, uint32_t id, int n) {
    FILE *f = fopen(out_path, "a");
    if (!f) return;
    if (n >= 0)
        fprintf(f, "%s %u blocked=%d\n", what, id, n);
    else
        fprintf(f, "%s %u\n", what, id);
    fclose(f);
}

int32_t iggy_sink_open(uint32_t id, const uint8_t *cfg, size_t n, iggy_log_cb log) {
    (void)log;
    if (!json_string(cfg, n, "out", out_path, sizeof out_path)) return -1;
    if (!json_string(cfg, n, "release", release_path, sizeof release_path)) return -1;
    note("open", id, -1);
    return 0;
}

int32_t iggy_sink_consume(uint32_t id, const uint8_t *tm, size_t tml, const uint8_t *mm, size_t mml,
                          const uint8_t *ms, size_t msl) {
    (void)tm, (void)tml, (void)mm, (void)mml, (void)ms, (void)msl;
    int now = __atomic_add_fetch(&blocked, 1, __ATOMIC_SEQ_CST);
    note("consume", id, now);
    while (access(release_path, F_OK) != 0) usleep(1000);
    __atomic_sub_fetch(&blocked, 1, __ATOMIC_SEQ_CST);
    note("returned", id, -1);
    return 0;
}

int32_t iggy_sink_close(uint32_t id) {
    note("close", id, -1);
    return 0;
}

const char *iggy_sink_version(void) { return "0.0.1-hang"; }

static int wait_release(void) {
    int now = __atomic_add_fetch(&blocked, 1, __ATOMIC_SEQ_CST);
    return now;
}

static void released(void) {
    while (access(release_path, F_OK) != 0) usleep(1000);
    __atomic_sub_fetch(&blocked, 1, __ATOMIC_SEQ_CST);
}

int32_t iggy_source_open(uint32_t id, const uint8_t *cfg, size_t n, const uint8_t *st, size_t stn,
                         iggy_log_cb log) {
    (void)st, (void)stn;
    return iggy_sink_open(id, cfg, n, log);
}

int32_t iggy_source_handle_v2(uint32_t id, iggy_send_cb_v2 cb) {
    (void)id, (void)cb;
    return 0;
}

int32_t iggy_source_batch_result(uint32_t id, uint64_t batch_id, uint8_t result) {
    (void)id, (void)batch_id, (void)result;
    return -1;
}

int32_t iggy_source_close(uint32_t id) {
    note("close", id, wait_release());
    released();
    note("returned", id, -1);
    return 0;
}

const char *iggy_source_version(void) { return "0.0.1-hang"; }
