/*
 * The request log: a ring of rendered JSON events.  Memory is bounded by the
 * ring size (--log-cap events; each event is a few hundred bytes, its strings
 * are truncated); when the ring is full the oldest event is overwritten and
 * counted in "dropped".
 */
#include "fakemodel.h"
#include "namemap.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t seq;
    uint64_t id;
    sg_fm_event_type type;
    char *key;  /* NULL when the request had none */
    char *json; /* the whole event object */
} log_entry;

/*
 * File-static rather than part of the server context: there is one log per
 * process (sg_fm_serve() runs once), and every file that records an event
 * can then call sg_fm_log_event() without carrying the server along.
 */
static struct {
    log_entry *ring;
    size_t cap;
    size_t head; /* oldest */
    size_t count;
    uint64_t next_seq;
    uint64_t dropped;
    FILE *jsonl;
} g_log;

static const char *const event_names[] = {
    "received", "headers_sent", "first_item_sent", "stall_started",
    "finished", "client_gone",  "conn_error",
};

int sg_fm_log_init(size_t cap, const char *jsonl_path) {
    g_log.ring = calloc(cap, sizeof(log_entry));
    if (g_log.ring == NULL) {
        return -1;
    }
    g_log.cap = cap;
    g_log.next_seq = 1;
    if (jsonl_path != NULL) {
        g_log.jsonl = fopen(jsonl_path, "a");
        if (g_log.jsonl == NULL) {
            return -1;
        }
    }
    return 0;
}

static void entry_free(log_entry *e) {
    free(e->key);
    free(e->json);
    memset(e, 0, sizeof(*e));
}

void sg_fm_log_reset(void) {
    for (size_t i = 0; i < g_log.count; i++) {
        entry_free(&g_log.ring[(g_log.head + i) % g_log.cap]);
    }
    g_log.head = 0;
    g_log.count = 0;
    g_log.dropped = 0;
}

void sg_fm_log_free(void) {
    sg_fm_log_reset();
    free(g_log.ring);
    g_log.ring = NULL;
    if (g_log.jsonl != NULL) {
        fclose(g_log.jsonl);
        g_log.jsonl = NULL;
    }
}

size_t sg_fm_log_count(void) {
    return g_log.count;
}

uint64_t sg_fm_log_dropped(void) {
    return g_log.dropped;
}

void sg_fm_log_event(uint64_t req_id, sg_fm_event_type type, int64_t t,
                     int64_t t_received, const char *key, const char *fields) {
    if (g_log.ring == NULL) {
        return;
    }
    sg_fm_buf b = {0};
    uint64_t seq = g_log.next_seq++;
    int rc = sg_fm_buf_printf(&b,
                              "{\"seq\":%llu,\"id\":%llu,\"event\":\"%s\",\"t_ns\":%lld,"
                              "\"t_ms\":%lld",
                              (unsigned long long)seq, (unsigned long long)req_id,
                              event_names[type], (long long)t, (long long)(t / 1000000));
    if (t_received > 0) {
        int64_t d = t - t_received;
        rc |= sg_fm_buf_printf(&b, ",\"since_received_ms\":%lld.%03lld",
                               (long long)(d / 1000000), (long long)(d / 1000 % 1000));
    }
    if (key != NULL) {
        rc |= sg_fm_buf_append(&b, ",\"key\":\"", 8);
        rc |= sg_fm_buf_json_str(&b, key, strlen(key));
        rc |= sg_fm_buf_append(&b, "\"", 1);
    }
    if (fields != NULL && fields[0] != '\0') {
        rc |= sg_fm_buf_append(&b, ",", 1);
        rc |= sg_fm_buf_append(&b, fields, strlen(fields));
    }
    rc |= sg_fm_buf_append(&b, "}", 2); /* with the NUL */
    char *kd = key != NULL ? strdup(key) : NULL;
    if (rc != 0 || (key != NULL && kd == NULL)) {
        free(kd);
        sg_fm_buf_free(&b);
        g_log.dropped++;
        return;
    }
    if (g_log.jsonl != NULL) {
        fputs(sg_fm_buf_data(&b), g_log.jsonl);
        fputc('\n', g_log.jsonl);
        fflush(g_log.jsonl);
    }
    log_entry *e;
    if (g_log.count == g_log.cap) {
        e = &g_log.ring[g_log.head];
        entry_free(e);
        g_log.head = (g_log.head + 1) % g_log.cap;
        g_log.dropped++;
    } else {
        e = &g_log.ring[(g_log.head + g_log.count) % g_log.cap];
        g_log.count++;
    }
    e->seq = seq;
    e->id = req_id;
    e->type = type;
    e->key = kd;
    /* Hand the buffer's allocation over instead of copying it. */
    if (b.off > 0) {
        memmove(b.p, b.p + b.off, b.len);
    }
    e->json = b.p;
}

static int64_t query_int(const char *v, size_t n) {
    int64_t x = 0;
    if (n == 0 || n > 18) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') {
            return -1;
        }
        x = x * 10 + (v[i] - '0');
    }
    return x;
}

int sg_fm_log_render(sg_fm_buf *out, const char *query, size_t query_len) {
    char key[256];
    long key_len = -1;
    int64_t id = -1;
    int64_t since = 0;
    int64_t limit = -1;
    int event = -1;
    const char *cur = query;
    const char *end = query + query_len;
    const char *n;
    const char *v;
    size_t nl;
    size_t vl;
    while (sg_fm_query_next(&cur, end, &n, &nl, &v, &vl)) {
        if (nl == 3 && memcmp(n, "key", 3) == 0) {
            key_len = sg_fm_url_decode(v, vl, key, sizeof(key));
            if (key_len < 0) {
                return -1;
            }
        } else if (nl == 2 && memcmp(n, "id", 2) == 0) {
            if ((id = query_int(v, vl)) < 0) {
                return -1;
            }
        } else if (nl == 5 && memcmp(n, "since", 5) == 0) {
            if ((since = query_int(v, vl)) < 0) {
                return -1;
            }
        } else if (nl == 5 && memcmp(n, "limit", 5) == 0) {
            if ((limit = query_int(v, vl)) < 0) {
                return -1;
            }
        } else if (nl == 5 && memcmp(n, "event", 5) == 0) {
            for (size_t i = 0; i < sizeof(event_names) / sizeof(event_names[0]); i++) {
                if (strlen(event_names[i]) == vl && memcmp(event_names[i], v, vl) == 0) {
                    event = (int)i;
                }
            }
            if (event < 0) {
                return -1;
            }
        } else {
            return -1;
        }
    }
    int rc = sg_fm_buf_append(out, "{\"events\":[", 11);
    size_t shown = 0;
    uint64_t last = 0;
    for (size_t i = 0; i < g_log.count && rc == 0; i++) {
        const log_entry *e = &g_log.ring[(g_log.head + i) % g_log.cap];
        if (e->seq <= (uint64_t)since || (id >= 0 && e->id != (uint64_t)id) ||
            (event >= 0 && (int)e->type != event)) {
            continue;
        }
        if (key_len >= 0 && (e->key == NULL || strlen(e->key) != (size_t)key_len ||
                             memcmp(e->key, key, (size_t)key_len) != 0)) {
            continue;
        }
        if (limit >= 0 && shown == (size_t)limit) {
            break;
        }
        /* One event a line, so shell tests can grep and count. */
        rc |= sg_fm_buf_append(out, shown ? ",\n" : "\n", shown ? 2 : 1);
        rc |= sg_fm_buf_append(out, e->json, strlen(e->json));
        shown++;
        last = e->seq;
    }
    rc |= sg_fm_buf_printf(out,
                           "\n],\"count\":%zu,\"last_seq\":%llu,\"next_seq\":%llu,"
                           "\"dropped\":%llu}\n",
                           shown, (unsigned long long)last,
                           (unsigned long long)g_log.next_seq,
                           (unsigned long long)g_log.dropped);
    return rc == 0 ? 0 : -2;
}

/* ------------------------------------------------------------ key counters */

/* File-static like the log ring, and reset with it (POST /_log/reset).
 * When 100,000 distinct keys exist, all counters restart (documented). */
static sg_fm_map g_keys = {.record = sizeof(uint64_t), .max = 100000};

uint64_t sg_fm_key_count(const char *key) {
    uint64_t *count = sg_fm_map_get(&g_keys, key != NULL ? key : "");
    if (count == NULL) {
        return 1;
    }
    return ++*count;
}

/* Clearing the log also restarts the fail_first counters: a fresh test. */
void sg_fm_keys_reset(void) {
    sg_fm_map_clear(&g_keys);
}
