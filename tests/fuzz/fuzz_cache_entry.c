/*
 * fuzz_cache_entry.c - libFuzzer target: the disk-cache entry reader. The first input byte picks a mode,
 * the rest is its data:
 *   0  the data is an entry file: fj_disk_cache_entry_decode against a fixed key must accept it only with
 *      the payload inside the image, and fj_disk_cache_load of the same bytes stored as the entry's file
 *      in a private cache directory must agree (hit with the same payload, or a miss that deletes it)
 *   1  the data is a payload (its first 8 bytes also the source hash): encode, decode back the same
 *      payload, then any one flipped bit or any shorter length of the image must be refused
 * Checks: no crash, leak, overread or hang, and the above. Build and run: tests/fuzz/README.md.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "runtime/disk_cache.h"

static const char *k_key = "fajit kernel\nformat: 2\nconfig: sm_80 bf16 d128 br64 bc64 s2 sw128 w4 noncausal\n";
static fj_disk_cache g_cache;
static char g_root[64];

static void remove_root(void)
{
    char dir[FJ_DISK_CACHE_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/kernels", g_root);
    rmdir(dir);
    rmdir(g_root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    atexit(remove_root);
    snprintf(g_root, sizeof g_root, "/tmp/fajit-fuzz-cache-XXXXXX");
    if (!mkdtemp(g_root) || fj_disk_cache_init(&g_cache, 1, g_root) != FAJIT_OK) abort();
    return 0;
}

/* Mode 0: the bytes as a file. */
static void entry_as_file(const uint8_t *img, size_t len)
{
    size_t off = 0, n = 0;
    const char *bad = fj_disk_cache_entry_decode(img, len, k_key, "cubin", 0, &off, &n);
    if (!bad) FUZZ_CHECK(off <= len && n <= len - off && off + n == len);
    char path[FJ_DISK_CACHE_PATH_MAX + 64];
    fj_disk_cache_entry_path(&g_cache, k_key, "cubin", path, sizeof path);
    if (fj_disk_cache_mkdirs(g_cache.entries_dir) != 0) abort();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || (len && write(fd, img, len) != (ssize_t)len)) abort();
    close(fd);
    void *payload = NULL;
    size_t size = 0;
    int hit = fj_disk_cache_load(&g_cache, k_key, "cubin", 0, &payload, &size);
    FUZZ_CHECK(hit == !bad);
    if (hit) FUZZ_CHECK(size == n && memcmp(payload, img + off, n) == 0 && ((char *)payload)[n] == '\0');
    else FUZZ_CHECK(payload == NULL && access(path, F_OK) != 0); /* deleted */
    free(payload);
    unlink(path);
}

/* Mode 1: encode a payload, decode it back, then damage the image. */
static void round_trip(const uint8_t *data, size_t size)
{
    uint64_t source = 0;
    for (size_t i = 0; i < 8 && i < size; i++) source = source << 8 | data[i];
    size_t len = 0, off = 0, n = 0;
    unsigned char *img = fj_disk_cache_entry_encode(k_key, "cubin", source, data, size, &len);
    if (!img) abort();
    FUZZ_CHECK(fj_disk_cache_entry_decode(img, len, k_key, "cubin", source, &off, &n) == NULL);
    FUZZ_CHECK(n == size && memcmp(img + off, data, size) == 0);
    FUZZ_CHECK(fj_disk_cache_entry_decode(img, len, k_key, "ptx", 0, &off, &n) != NULL); /* another kind */
    uint64_t other = source == 1 ? 2 : source ^ 1; /* another source hash, never 0 (= not checked) */
    if (source) FUZZ_CHECK(fj_disk_cache_entry_decode(img, len, k_key, "cubin", other, &off, &n) != NULL);
    size_t bit = (size_t)(source % (8 * len)); /* one flipped bit, wherever the input says */
    img[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    FUZZ_CHECK(fj_disk_cache_entry_decode(img, len, k_key, "cubin", 0, &off, &n) != NULL);
    img[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    FUZZ_CHECK(fj_disk_cache_entry_decode(img, bit / 8, k_key, "cubin", 0, &off, &n) != NULL); /* truncated */
    free(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    if (data[0] % 2 == 0) entry_as_file(data + 1, size - 1);
    else round_trip(data + 1, size - 1);
    return 0;
}
