/*
 * hash.h - hashes for the disk cache: a 128-bit key hash (file names) and a 64-bit payload checksum.
 *
 * The key hash is two unrelated 64-bit hashes of the same bytes (XXH64 and FNV-1a 64), so a file name
 * collision needs both to collide; the cache stores the full key text in each entry anyway and compares
 * it on every read, so a collision can cost a rebuild, never a wrong kernel. The checksum is XXH64,
 * which follows the published specification (test vectors in tests/test_cache.c).
 */
#ifndef FJ_HASH_H
#define FJ_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct fj_hash128 {
    uint64_t hi; /* XXH64, seed 0 */
    uint64_t lo; /* FNV-1a 64 */
} fj_hash128;

/* Hex text of a 128-bit hash: 32 lowercase digits + NUL. */
#define FJ_HASH128_HEX_SIZE 33

uint64_t fj_xxh64(const void *data, size_t len, uint64_t seed);
uint64_t fj_fnv1a64(const void *data, size_t len);
fj_hash128 fj_hash128_of(const void *data, size_t len);
/* Writes 32 hex digits and a NUL into out[FJ_HASH128_HEX_SIZE]. */
void fj_hash128_hex(fj_hash128 h, char *out);
/* Checksum of a payload (XXH64, seed 0). */
uint64_t fj_checksum64(const void *data, size_t len);
/* The source hash a disk-cache entry keeps of what its payload was made from: XXH64, never 0 (0 there
 * means "none" / "not checked"). */
uint64_t fj_source_hash(const void *data, size_t len);

#endif
