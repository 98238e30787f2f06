/*
 * The bounded name map (namemap.h): chained buckets, FNV-1a hashes.  Each
 * node holds its record, then its name.
 */
#include "namemap.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 4096

struct sg_fm_map_node {
    sg_fm_map_node *next;
    max_align_t record[]; /* the record, then the name (NUL-terminated) */
};

/* The record's bytes rounded up, so the name after it is aligned as well. */
static size_t record_span(const sg_fm_map *m) {
    return (m->record + sizeof(max_align_t) - 1) / sizeof(max_align_t) *
           sizeof(max_align_t);
}

static const char *node_name(const sg_fm_map *m, const sg_fm_map_node *k) {
    return (const char *)k->record + record_span(m);
}

void sg_fm_map_clear(sg_fm_map *m) {
    if (m->buckets != NULL) {
        for (size_t i = 0; i < BUCKETS; i++) {
            sg_fm_map_node *k = m->buckets[i];
            while (k != NULL) {
                sg_fm_map_node *next = k->next;
                free(k);
                k = next;
            }
        }
        free(m->buckets);
    }
    m->buckets = NULL;
    m->n = 0;
}

void *sg_fm_map_get(sg_fm_map *m, const char *name) {
    uint32_t h = 2166136261u;
    for (const char *p = name; *p; p++) {
        h = (h ^ (unsigned char)*p) * 16777619u;
    }
    if (m->buckets != NULL) {
        for (sg_fm_map_node *k = m->buckets[h % BUCKETS]; k != NULL; k = k->next) {
            if (strcmp(node_name(m, k), name) == 0) {
                return k->record;
            }
        }
    }
    if (m->n >= m->max) {
        sg_fm_map_clear(m);
    }
    if (m->buckets == NULL) {
        m->buckets = calloc(BUCKETS, sizeof(*m->buckets));
        if (m->buckets == NULL) {
            return NULL;
        }
    }
    size_t len = strlen(name);
    sg_fm_map_node *k = calloc(1, sizeof(*k) + record_span(m) + len + 1);
    if (k == NULL) {
        return NULL;
    }
    memcpy((char *)k->record + record_span(m), name, len + 1);
    k->next = m->buckets[h % BUCKETS];
    m->buckets[h % BUCKETS] = k;
    m->n++;
    return k->record;
}
