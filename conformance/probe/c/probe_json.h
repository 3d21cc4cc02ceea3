/* probe_json.h — the flat JSON lookup both probe plugins read their plugin_config with
 * ("key":value at any depth; the suite writes flat objects). Included by probe.c and
 * source.c; the suite writes it beside them before compiling. */
#ifndef FERRY_PROBE_JSON_H
#define FERRY_PROBE_JSON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *jfind(const char *cfg, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(cfg, pat);
    return p ? p + strlen(pat) : NULL;
}
static uint64_t jnum(const char *cfg, const char *key, uint64_t def) {
    const char *p = jfind(cfg, key);
    return p ? strtoull(p, NULL, 10) : def;
}
static int jstr(const char *cfg, const char *key, char *out, size_t cap) {
    const char *p = jfind(cfg, key);
    if (!p || *p != '"') return 0;
    p++;
    size_t i = 0;
    for (; *p && *p != '"' && i + 1 < cap; p++) {
        if (*p == '\\' && p[1]) p++;
        out[i++] = *p;
    }
    out[i] = 0;
    return 1;
}

#endif
