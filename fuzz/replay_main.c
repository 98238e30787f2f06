/*
 * Replays a fuzz corpus without libFuzzer: every regular file named on the
 * command line, or found directly inside a named directory, is passed to
 * LLVMFuzzerTestOneInput once.  Exits non-zero if nothing was replayed, so a
 * missing corpus cannot pass silently.
 *
 * -rounds=N (the first argument) replays the whole set N times in one
 * process and fails unless the heap in use after the last round equals the
 * heap in use after the first: the inputs are the same each round, so
 * anything more is memory the target or the library kept from an input.  A
 * leak LeakSanitizer reports at exit is caught without it; this catches the
 * retained allocation that is still reachable (a cache, a static list), and
 * in the sanitizer build it counts live blocks only, not ASan's quarantine
 * of freed ones (fuzz/README.md).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__has_feature)
#    if __has_feature(address_sanitizer)
#        define FZ_ASAN 1
#    endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(FZ_ASAN)
#    define FZ_ASAN 1
#endif
#ifndef FZ_ASAN
#    include <malloc.h>
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef FZ_ASAN
/* The sanitizer runtime's (sanitizer/allocator_interface.h, which gcc does
 * not ship): bytes in live blocks, freed ones in quarantine excluded. */
size_t __sanitizer_get_current_allocated_bytes(void);

static size_t heap_in_use(void) {
    return __sanitizer_get_current_allocated_bytes();
}
#else
static size_t heap_in_use(void) {
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}
#endif

/* glibc counts the freed blocks its per-thread cache keeps as in use (up to
 * 7 of each size), so that cache must be off for the heap in use to be
 * exact. */
static int heap_in_use_exact(void) {
#ifdef FZ_ASAN
    return 1;
#else
    const char *t = getenv("GLIBC_TUNABLES");
    return t != NULL && strstr(t, "glibc.malloc.tcache_count=0") != NULL;
#endif
}

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return -1;
    }
    long len = ftell(f);
    rewind(f);
    if (len < 0) {
        fclose(f);
        return -1;
    }
    /* An exact-size heap copy, so ASan catches any read past the input. */
    uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
    if (buf == NULL) {
        fclose(f);
        return -1;
    }
    size_t got = fread(buf, 1, (size_t)len, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    return 0;
}

/* Replays every input named in @paths once; -1 if one cannot be read. */
static int replay_all(char **paths, int n, unsigned long *replayed) {
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0) {
            perror(paths[i]);
            return -1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (replay_file(paths[i]) == 0) {
                (*replayed)++;
            }
            continue;
        }
        DIR *d = opendir(paths[i]);
        if (d == NULL) {
            perror(paths[i]);
            return -1;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') {
                continue;
            }
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", paths[i], e->d_name);
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && replay_file(path) == 0) {
                (*replayed)++;
            }
        }
        closedir(d);
    }
    return 0;
}

int main(int argc, char **argv) {
    unsigned long rounds = 1;
    int first = 1;
    if (argc > 1 && strncmp(argv[1], "-rounds=", 8) == 0) {
        char *end;
        rounds = strtoul(argv[1] + 8, &end, 10);
        if (*end != '\0' || rounds == 0) {
            fprintf(stderr, "%s: -rounds takes a count of at least 1\n", argv[0]);
            return 2;
        }
        first = 2;
    }
    if (rounds > 1 && !heap_in_use_exact()) {
        fprintf(stderr,
                "%s: -rounds needs GLIBC_TUNABLES=glibc.malloc.tcache_count=0 "
                "(glibc counts the blocks it caches per thread as in use)\n",
                argv[0]);
        return 2;
    }
    unsigned long replayed = 0;
    size_t after_first = 0;
    for (unsigned long r = 0; r < rounds; r++) {
        if (replay_all(argv + first, argc - first, &replayed) != 0) {
            return 1;
        }
        if (r == 0) {
            after_first = heap_in_use();
        }
    }
    /* Measured before printing: stdout's buffer is allocated by the first
     * printf. */
    size_t after_last = heap_in_use();
    printf("replayed %lu inputs, %lu round(s)\n", replayed / rounds, rounds);
    if (rounds > 1) {
        printf("heap in use after round 1: %zu bytes, after round %lu: %zu bytes\n",
               after_first, rounds, after_last);
        if (after_last != after_first) {
            fprintf(stderr,
                    "%s: the heap in use changed between rounds: memory kept "
                    "from an input\n",
                    argv[0]);
            return 1;
        }
    }
    return replayed > 0 ? 0 : 1;
}
