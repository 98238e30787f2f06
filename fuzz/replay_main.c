/*
 * Replays a fuzz corpus without libFuzzer: every regular file named on the
 * command line, or found directly inside a named directory, is passed to
 * LLVMFuzzerTestOneInput once.  Exits non-zero if nothing was replayed, so a
 * missing corpus cannot pass silently.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

int main(int argc, char **argv) {
    unsigned long replayed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (replay_file(argv[i]) == 0) {
                replayed++;
            }
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (d == NULL) {
            perror(argv[i]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') {
                continue;
            }
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && replay_file(path) == 0) {
                replayed++;
            }
        }
        closedir(d);
    }
    printf("replayed %lu inputs\n", replayed);
    return replayed > 0 ? 0 : 1;
}
