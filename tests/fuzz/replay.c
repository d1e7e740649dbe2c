/*
 * replay.c - runs a fuzz target's LLVMFuzzerTestOneInput over files, without libFuzzer: the regression
 * inputs and seed corpus of tests/fuzz replayed by ctest in any build (gcc included).
 *   usage: fuzz_replay_<target> FILE_OR_DIR...   (directories: every regular file in them)
 * Exit 0 when every input ran (a failing check aborts), 1 when an argument cannot be read.
 */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int g_count;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(fuzz_report(), "replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf) abort();
    /* libFuzzer hands over exactly n bytes: copy into an exact-size block so ASan sees overreads */
    unsigned char *exact = malloc(n ? n : 1);
    if (!exact) abort();
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    g_count++;
    return 0;
}

static int replay_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(fuzz_report(), "replay: %s: not found\n", path);
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) return replay_file(path);
    DIR *d = opendir(path);
    if (!d) return 1;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char full[4096];
        if (e->d_name[0] == '.') continue; /* also skips README-less dot files */
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) rc |= replay_file(full);
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = 0;
    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) rc |= replay_path(argv[i]);
    fprintf(fuzz_report(), "replay: %d inputs\n", g_count);
    return rc;
}
