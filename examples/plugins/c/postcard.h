/* postcard.h — the minimal postcard reader/writer the example plugins need (header only).
 * Layouts: include/iggy_connector.h. Readers are sticky: after an error every read returns 0
 * and r->err stays set; check it once after reading a value. Writers grow a malloc'ed buffer;
 * on allocation failure w->err is set. */
#ifndef FERRY_EXAMPLE_POSTCARD_H
#define FERRY_EXAMPLE_POSTCARD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n, off;
    int err;
} pc_reader;

static inline pc_reader pc_reader_new(const uint8_t *p, size_t n) {
    pc_reader r = {p, n, 0, 0};
    return r;
}

static inline size_t pc_remaining(const pc_reader *r) { return r->err ? 0 : r->n - r->off; }

/* Unsigned varint of at most max_len bytes whose last byte is at most last (postcard rules).
 * u32: 5/0x0f, u64: 10/0x01. */
static inline uint64_t pc_varint(pc_reader *r, int max_len, uint8_t last) {
    uint64_t v = 0;
    if (r->err) return 0;
    for (int i = 0; i < max_len; i++) {
        if (r->off >= r->n) { r->err = 1; return 0; }
        uint8_t c = r->p[r->off++];
        v |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            if (i == max_len - 1 && c > last) { r->err = 1; return 0; }
            return v;
        }
    }
    r->err = 1;
    return 0;
}
static inline uint32_t pc_u32(pc_reader *r) { return (uint32_t)pc_varint(r, 5, 0x0f); }
static inline uint64_t pc_u64(pc_reader *r) { return pc_varint(r, 10, 0x01); }

/* u128 varint into (lo, hi). */
static inline void pc_u128(pc_reader *r, uint64_t *lo, uint64_t *hi) {
    *lo = *hi = 0;
    if (r->err) return;
    for (int i = 0; i < 19; i++) {
        if (r->off >= r->n) { r->err = 1; return; }
        uint8_t c = r->p[r->off++];
        uint64_t bits = c & 0x7f;
        unsigned pos = 7u * (unsigned)i;
        if (pos < 64) {
            *lo |= bits << pos;
            if (pos > 57) *hi |= bits >> (64 - pos);
        } else {
            *hi |= bits << (pos - 64);
        }
        if (!(c & 0x80)) {
            if (i == 18 && c > 0x03) r->err = 1;
            return;
        }
    }
    r->err = 1;
}

/* Length-prefixed bytes (String or Vec<u8>): returns a pointer into the input. */
static inline const uint8_t *pc_bytes(pc_reader *r, size_t *len) {
    uint64_t n = pc_u64(r);
    *len = 0;
    if (r->err) return NULL;
    if (n > r->n - r->off) { r->err = 1; return NULL; }
    const uint8_t *p = r->p + r->off;
    r->off += (size_t)n;
    *len = (size_t)n;
    return p;
}

/* Option tag: 1 when Some. */
static inline int pc_option(pc_reader *r) {
    if (r->err) return 0;
    if (r->off >= r->n) { r->err = 1; return 0; }
    uint8_t c = r->p[r->off++];
    if (c > 1) { r->err = 1; return 0; }
    return c;
}

typedef struct {
    uint8_t *p;
    size_t n, cap;
    int err;
} pc_writer;

static inline void pc_put(pc_writer *w, const void *b, size_t n) {
    if (w->err) return;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        while (cap < w->n + n) cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (!p) { w->err = 1; return; }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->n, b, n);
    w->n += n;
}
static inline void pc_put_byte(pc_writer *w, uint8_t b) { pc_put(w, &b, 1); }
static inline void pc_put_varint(pc_writer *w, uint64_t v) {
    while (v >= 0x80) { pc_put_byte(w, (uint8_t)(v | 0x80)); v >>= 7; }
    pc_put_byte(w, (uint8_t)v);
}
static inline void pc_put_u128(pc_writer *w, uint64_t lo, uint64_t hi) {
    while (hi != 0 || lo >= 0x80) {
        pc_put_byte(w, (uint8_t)(lo | 0x80));
        lo = (lo >> 7) | (hi << 57);
        hi >>= 7;
    }
    pc_put_byte(w, (uint8_t)lo);
}
static inline void pc_put_bytes(pc_writer *w, const void *b, size_t n) {
    pc_put_varint(w, n);
    pc_put(w, b, n);
}
static inline void pc_writer_free(pc_writer *w) { free(w->p); w->p = NULL; w->n = w->cap = 0; }

/* Minimal JSON helpers for flat configs like {"path":"/tmp/x","flush_interval_ms":50}: no
 * escapes in strings, no nesting. Return 0 when the key is absent or malformed. */
static inline int json_find(const uint8_t *cfg, size_t n, const char *key, size_t *at) {
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 2 <= n; i++) {
        if (cfg[i] == '"' && memcmp(cfg + i + 1, key, kl) == 0 && cfg[i + 1 + kl] == '"') {
            size_t j = i + kl + 2;
            while (j < n && (cfg[j] == ' ' || cfg[j] == ':')) j++;
            *at = j;
            return 1;
        }
    }
    return 0;
}
static inline int json_string(const uint8_t *cfg, size_t n, const char *key, char *out, size_t outcap) {
    size_t j;
    if (!json_find(cfg, n, key, &j) || j >= n || cfg[j] != '"') return 0;
    size_t k = j + 1;
    while (k < n && cfg[k] != '"') k++;
    if (k >= n || k - j - 1 >= outcap) return 0;
    memcpy(out, cfg + j + 1, k - j - 1);
    out[k - j - 1] = 0;
    return 1;
}
static inline int json_u64(const uint8_t *cfg, size_t n, const char *key, uint64_t *out) {
    size_t j;
    if (!json_find(cfg, n, key, &j) || j >= n || cfg[j] < '0' || cfg[j] > '9') return 0;
    uint64_t v = 0;
    while (j < n && cfg[j] >= '0' && cfg[j] <= '9') v = v * 10 + (uint64_t)(cfg[j++] - '0');
    *out = v;
    return 1;
}

#endif
