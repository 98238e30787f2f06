/*
 * Compaction: the live index rewritten as the fewest records that replay to
 * it, in a temporary file that replaces the data file by rename(2), under
 * the exclusive lock.  Other handles notice the new file on their next call
 * (see sg__ledger_refresh in log.c).
 */
#define _GNU_SOURCE
#include "ledger/internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* -------------------------------------------------------------- compaction */

typedef struct cbuf {
    int fd;
    uint8_t *buf;
    size_t len;
    size_t cap;
    uint64_t total;
    uint64_t records;
    int rv;
} cbuf;

static void cbuf_flush(cbuf *c) {
    if (c->rv == 0 && c->len > 0) {
        c->rv = sg__ledger_write_all(c->fd, c->buf, c->len);
    }
    c->len = 0;
}

static void cbuf_add(cbuf *c, const sg__ledger_rec *r, uint8_t *scratch) {
    if (c->rv != 0) {
        return;
    }
    int n = sg__ledger_encode(r, scratch, SG__LEDGER_REC_MAX);
    if (n < 0) {
        c->rv = n;
        return;
    }
    if (c->len + (size_t)n > c->cap) {
        cbuf_flush(c);
    }
    memcpy(c->buf + c->len, scratch, (size_t)n);
    c->len += (size_t)n;
    c->total += (uint64_t)n;
    c->records++;
}

/* The part every record about @e shares. */
static sg__ledger_rec rec_about(const sg__ledger_ent *e, uint8_t type, int64_t wall_ns) {
    return (sg__ledger_rec){
        .type = type, .wall_ns = wall_ns, .key = e->key, .key_len = e->key_len};
}

/* Re-emits one live operation as the fewest records that replay to the
 * same entry. */
static void emit_entry(cbuf *c, const sg__ledger_ent *e, uint8_t *scratch) {
    sg__ledger_rec r = rec_about(e, SG__LREC_INTENT, e->first_seen_ns);
    r.pid = e->pid;
    r.method = e->method;
    r.method_len = strlen(e->method);
    r.url = e->url;
    r.url_len = strlen(e->url);
    cbuf_add(c, &r, scratch);
    if (e->has_last) {
        sg__ledger_rec a = rec_about(e, SG__LREC_ATTEMPT, e->last_attempt_ns);
        a.n = e->attempts;
        a.outcome = e->last_outcome;
        a.phase = e->last_phase;
        a.flags = e->last_flags;
        a.http_status = e->last_status;
        cbuf_add(c, &a, scratch);
    }
    if (e->state == SG_LEDGER_UNRESOLVED_UNKNOWN) {
        sg__ledger_rec s = rec_about(e, SG__LREC_RESOLVE, e->resolved_ns);
        s.resolution = SG_LEDGER_UNKNOWN;
        s.outcome = e->final_outcome;
        cbuf_add(c, &s, scratch);
    }
}

static int do_compact(sg_ledger *l, void *arg) {
    (void)arg;
    cbuf c = {.cap = (size_t)64 * 1024};
    c.buf = malloc(c.cap);
    if (c.buf == NULL) {
        return SG_ENOMEM;
    }
    /* A compactor that died left its temporary file: O_TRUNC reuses it.
     * The exclusive lock means no one else is writing it now. */
    c.fd =
        openat(l->dir_fd, SG__LEDGER_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (c.fd < 0) {
        free(c.buf);
        return SG_ESYS;
    }
    for (const sg__ledger_ent *e = l->head; e != NULL && c.rv == 0; e = e->next) {
        emit_entry(&c, e, l->recbuf);
    }
    cbuf_flush(&c);
    free(c.buf);
    int rv = c.rv;
    /* The new file must be on disk before its name replaces the old one,
     * and the rename on disk before we say it happened.  FSYNC_NEVER skips
     * both: the swap stays atomic for a process crash, not a power loss. */
    bool sync = l->opts.fsync != SG_LEDGER_FSYNC_NEVER;
    if (rv == 0 && sync) {
        rv = sg__ledger_fsync(c.fd);
    }
    close(c.fd);
    if (rv == 0 && renameat(l->dir_fd, SG__LEDGER_TMP, l->dir_fd, SG__LEDGER_DATA) != 0) {
        rv = SG_ESYS;
    }
    if (rv != 0) {
        unlinkat(l->dir_fd, SG__LEDGER_TMP, 0);
        return rv;
    }
    rv = sync ? sg__ledger_sync_dir(l) : 0;
    /* From here the new file is the ledger whatever happens; follow it. */
    int fd = openat(l->dir_fd, SG__LEDGER_DATA, O_RDWR | O_APPEND | O_CLOEXEC);
    struct stat fs;
    if (fd < 0 || fstat(fd, &fs) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        /* The next call sees the old descriptor unlinked and reopens. */
        return rv != 0 ? rv : SG_ESYS;
    }
    /* Synced, the new file makes every record written before it durable:
     * the live ones are in it, the settled ones are gone for good. */
    (void)sg__ledger_sync_swap_fd(l, fd, sync && rv == 0, SG_TIME_NEVER);
    if ((uint64_t)fs.st_size == c.total) {
        l->off = l->size = c.total;
        memset(&l->stats, 0, sizeof(l->stats));
        l->stats.records = c.records;
        l->stats.file_bytes = c.total;
    } else {
        /* Not what we wrote: replay it rather than trust the index. */
        sg__ledger_clear_index(l);
        l->off = 0;
        memset(&l->stats, 0, sizeof(l->stats));
        int r2 = sg__ledger_refresh(l, SG_TIME_NEVER);
        if (rv == 0) {
            rv = r2;
        }
    }
    return rv;
}

int sg__ledger_file_compact(sg_ledger *l) {
    return sg__ledger_with_lock(l, LOCK_EX, do_compact, NULL);
}
