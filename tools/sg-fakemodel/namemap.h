/*
 * A map from names to small fixed-size records, bounded: the fail_first
 * counters (one count a key) and the rate limiters (one window a key) live
 * in one.  libc only; the unit tests include namemap.c.
 *
 * One thread: sg-fakemodel's loop is the only caller, so nothing is locked.
 */
#ifndef SG_FAKEMODEL_NAMEMAP_H
#define SG_FAKEMODEL_NAMEMAP_H

#include <stddef.h>

typedef struct sg_fm_map_node sg_fm_map_node;

/* Set `record` and `max` (a compound literal will do); the rest starts
 * zeroed and is the map's. */
typedef struct {
    size_t record; /* bytes of each record */
    size_t max;    /* names kept; a new one beyond them clears the map first */
    sg_fm_map_node **buckets;
    size_t n;
} sg_fm_map;

/*
 * The record of @name, zero-filled when the name is new.  A new name that
 * would be the max+1-th clears every record first (all counts restart):
 * memory stays bounded whatever names the clients send.  Returns NULL
 * when out of memory.
 */
void *sg_fm_map_get(sg_fm_map *m, const char *name);

/* Forgets every name and frees everything (the map stays usable). */
void sg_fm_map_clear(sg_fm_map *m);

#endif
