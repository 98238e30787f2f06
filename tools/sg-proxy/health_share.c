/*
 * health_share.c - the process's endpoint health shared with the other
 * sg-proxy processes of a fleet through PostgreSQL (docs/sg-proxy.md,
 * "ENDPOINT HEALTH"; docs/health.md): --health-share URI, and the
 * credential key every proxy of the fleet holds (--health-key-file, or
 * the environment's SG_PROXY_HEALTH_KEY), without which their keys never
 * match.  A 429's Retry-After or an open breaker learned by one proxy is
 * then honoured by the others within milliseconds; a lost database is
 * said once on stderr, and each proxy goes on with what it learns itself.
 * Built with the library's PostgreSQL part only (health.c says so
 * without it).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <streamguard/health_pg.h>

#include "conn.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

static void share_log(const char *message, void *user_data) {
    (void)user_data;
    fprintf(stderr, "%s: %s\n", prog, message);
}

/* The bytes of the key file @path, without one trailing newline, into
 * @key (@cap bytes): their count, or -1 with the reason in @err.  A file
 * others may read is refused: the key makes the table's keys confirm a
 * guessed credential. */
static int read_key_file(const char *path, uint8_t *key, size_t cap, char *err,
                         size_t errlen) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return ERR("cannot open --health-key-file %s: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & S_IROTH) != 0) {
        close(fd);
        return ERR("--health-key-file %s: %s", path,
                   (st.st_mode & S_IROTH) != 0 ? "readable by others (chmod 600 it)"
                                               : "not a regular file");
    }
    size_t n = 0;
    ssize_t r = 1;
    while (n < cap && r > 0) {
        r = read(fd, key + n, cap - n);
        n += r > 0 ? (size_t)r : 0;
    }
    close(fd);
    if (r < 0 || n == cap) {
        return ERR("--health-key-file %s: %s", path,
                   r < 0 ? strerror(errno) : "longer than the 4096 bytes a key may be");
    }
    n -= n > 0 && key[n - 1] == '\n';
    n -= n > 0 && key[n - 1] == '\r';
    return (int)n;
}

int health_share_start(struct proxy *p, const char *uri, const char *key_file, char *err,
                       size_t errlen) {
    if (uri == NULL) {
        return 0;
    }
    uint8_t key[SG_HEALTH_CREDENTIAL_KEY_MAX + 1];
    int n;
    const char *env = getenv("SG_PROXY_HEALTH_KEY");
    if (key_file != NULL) {
        n = read_key_file(key_file, key, sizeof(key), err, errlen);
    } else if (env != NULL) {
        n = (int)strnlen(env, sizeof(key));
        memcpy(key, env, (size_t)n);
    } else {
        return ERR("--health-share needs the key every proxy of the fleet shares: "
                   "--health-key-file PATH (or SG_PROXY_HEALTH_KEY)");
    }
    if (n < 0) {
        return -1;
    }
    const int rv = sg_health_set_credential_key(p->health, key, (size_t)n);
    memset(key, 0, sizeof(key));
    if (rv != 0) {
        return ERR("the health key holds %d bytes: it takes %d to %d (say, head -c 32 "
                   "/dev/urandom | base64)",
                   n, SG_HEALTH_CREDENTIAL_KEY_MIN, SG_HEALTH_CREDENTIAL_KEY_MAX);
    }
    sg_health_pg_options *o = NULL;
    if (sg_health_pg_options_new(&o) != 0 ||
        sg_health_pg_options_set_log(o, share_log, NULL) != 0) {
        sg_health_pg_options_free(o);
        return ERR("out of memory");
    }
    const int made = sg_health_pg_new(&p->share, p->health, uri, o);
    sg_health_pg_options_free(o);
    if (made == SG_EINVAL) {
        return ERR("--health-share takes a postgresql:// URI libpq can read");
    }
    return made == 0 ? 0 : ERR("--health-share: %s", sg_strerror(made));
}

void health_share_free(struct proxy *p) {
    sg_health_pg_free(p->share);
    p->share = NULL;
}

bool health_share_figures(const struct proxy *p, struct health_share_figures *out) {
    sg_health_pg_stats st = SG_HEALTH_PG_STATS_INIT;
    if (p->share == NULL || sg_health_pg_get_stats(p->share, &st) != 0) {
        return false;
    }
    *out = (struct health_share_figures){
        .connected = st.connected,
        .queued = st.queued,
        .learned = st.learned,
        .published = st.published,
        .dropped = st.dropped,
        .expired = st.expired,
        .received = st.received,
        .applied = st.applied,
        .ignored = st.ignored,
        .losses = st.losses,
    };
    return true;
}
