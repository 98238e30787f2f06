/*
 * What the ledger's unit tests share: a fresh directory per test under
 * $TMPDIR (default /tmp), the ledger directory inside it, removed whole at
 * the end; and the data file's stat.  Include after <cmocka.h>.
 */
#ifndef SG_TEST_LEDGER_TEST_DIR_H
#define SG_TEST_LEDGER_TEST_DIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "ledger/internal.h"

typedef struct ledger_test_dir {
    char dir[256];    /* the test's own directory */
    char ledger[300]; /* the ledger directory in it, not created */
} ledger_test_dir;

/* Creates the directory.  Returns 0, or -1 (a cmocka setup's failure). */
static inline int ledger_test_dir_make(ledger_test_dir *d) {
    const char *tmp = getenv("TMPDIR");
    snprintf(d->dir, sizeof(d->dir), "%s/sg-ledger-XXXXXX", tmp ? tmp : "/tmp");
    if (mkdtemp(d->dir) == NULL) {
        return -1;
    }
    snprintf(d->ledger, sizeof(d->ledger), "%s/l", d->dir);
    return 0;
}

static inline int ledger_test_rm_one(const char *path, const struct stat *st, int flag,
                                     struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes the directory and everything in it. */
static inline void ledger_test_dir_remove(const ledger_test_dir *d) {
    nftw(d->dir, ledger_test_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* stat(2) of the ledger's data file, which must exist. */
static inline struct stat ledger_test_data_stat(const ledger_test_dir *d) {
    char path[400];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", d->ledger, SG__LEDGER_DATA);
    assert_int_equal(stat(path, &st), 0);
    return st;
}

#endif
