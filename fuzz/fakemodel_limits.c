/*
 * Fuzz target for sg-fakemodel's rate limiter (tools/sg-fakemodel/
 * ratelimit.c) and the bounded name map it keeps its windows in: the input
 * is lines, each a request - its first byte how long after the last one it
 * came (the byte squared, in ms, so windows of minutes are reached), the
 * rest its scenario query.  Every verdict is held to the limiter's
 * promises (an admitted request stays within each limit it sets, a refused
 * one names a limit it would pass, the reset lies within the window) and
 * its headers and message are rendered.  Deterministic: the clock is the
 * input's.  The files are included directly: they are libc only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/sg-fakemodel/namemap.c"
#include "../tools/sg-fakemodel/ratelimit.c"
#include "../tools/sg-fakemodel/scenario.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts unless verdict @v keeps the limiter's promises. */
static void check_verdict(const sg_fm_rl_verdict *v) {
    if (v->reset_ns <= 0 || v->reset_ns > v->window_ms * 1000000) {
        abort();
    }
    for (int d = 0; d < SG_FM_RL_DIMS; d++) {
        if (v->admitted && v->limit[d] > 0 && v->used[d] > v->limit[d]) {
            abort();
        }
    }
    if (!v->admitted && (v->limit[v->over] <= 0 ||
                         v->used[v->over] + v->requested[v->over] <= v->limit[v->over])) {
        abort();
    }
    sg_fm_rl_header h[SG_FM_RL_MAX_HEADERS];
    size_t n = sg_fm_rl_headers(v, 1755780059LL * 1000000000, h);
    for (size_t i = 0; i < n; i++) {
        if (h[i].name == NULL || h[i].value[0] == '\0') {
            abort();
        }
    }
    char msg[256];
    sg_fm_rl_message(v, msg, sizeof(msg));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* few names, so that the map's clearing is reached too */
    sg_fm_map limiters = {.record = sizeof(sg_fm_rl_window), .max = 4};
    int64_t now = 1000000000;
    const char *p = (const char *)data;
    const char *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl != NULL ? nl : end;
        int64_t step = (unsigned char)*p;
        now += step * step * 1000000;
        sg_fm_scenario s;
        char err[160];
        sg_fm_rl_verdict v;
        sg_fm_scenario_init(&s, step % 2 ? SG_FM_FMT_ANTHROPIC : SG_FM_FMT_SSE);
        if (sg_fm_scenario_parse(&s, p + 1 < stop ? p + 1 : stop,
                                 (size_t)(stop - (p + 1 < stop ? p + 1 : stop)), err,
                                 sizeof(err)) == 0) {
            sg_fm_scenario_set_body(&s, (uint64_t)step * 7);
            if (sg_fm_scenario_check(&s, err, sizeof(err)) == 0 &&
                sg_fm_scenario_rate_limited(&s) &&
                sg_fm_rl_judge(&limiters, s.rl_key, &s, now, &v) == 0) {
                check_verdict(&v);
            }
        }
        p = stop + 1;
    }
    sg_fm_map_clear(&limiters);
    return 0;
}
