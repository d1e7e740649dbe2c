/*
 * hash.c - XXH64 (the xxHash 64-bit algorithm, written from its specification) and FNV-1a 64, combined
 * into the 128-bit cache-key hash of hash.h. Byte order independent: words are read little-endian.
 */
#include "hash.h"

#include <stdio.h>

#define XXH_P1 0x9E3779B185EBCA87ull
#define XXH_P2 0xC2B2AE3D27D4EB4Full
#define XXH_P3 0x165667B19E3779F9ull
#define XXH_P4 0x85EBCA77C2B2AE63ull
#define XXH_P5 0x27D4EB2F165667C5ull

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint32_t read_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t xxh_round(uint64_t acc, uint64_t input)
{
    acc += input * XXH_P2;
    acc = rotl64(acc, 31);
    return acc * XXH_P1;
}

static uint64_t xxh_merge(uint64_t acc, uint64_t val)
{
    acc ^= xxh_round(0, val);
    return acc * XXH_P1 + XXH_P4;
}

/* The 32-byte stripes: four accumulators, merged into one. Advances *p. */
static uint64_t xxh_stripes(const unsigned char **p, const unsigned char *end, uint64_t seed)
{
    uint64_t v1 = seed + XXH_P1 + XXH_P2, v2 = seed + XXH_P2, v3 = seed, v4 = seed - XXH_P1;
    const unsigned char *q = *p;
    while (end - q >= 32) {
        v1 = xxh_round(v1, read_le64(q));
        v2 = xxh_round(v2, read_le64(q + 8));
        v3 = xxh_round(v3, read_le64(q + 16));
        v4 = xxh_round(v4, read_le64(q + 24));
        q += 32;
    }
    *p = q;
    uint64_t h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
    h = xxh_merge(h, v1);
    h = xxh_merge(h, v2);
    h = xxh_merge(h, v3);
    return xxh_merge(h, v4);
}

uint64_t fj_xxh64(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data, *end = p + len;
    uint64_t h = len >= 32 ? xxh_stripes(&p, end, seed) : seed + XXH_P5;
    h += (uint64_t)len;
    for (; end - p >= 8; p += 8) {
        h ^= xxh_round(0, read_le64(p));
        h = rotl64(h, 27) * XXH_P1 + XXH_P4;
    }
    if (end - p >= 4) {
        h ^= (uint64_t)read_le32(p) * XXH_P1;
        h = rotl64(h, 23) * XXH_P2 + XXH_P3;
        p += 4;
    }
    for (; p < end; p++) {
        h ^= (uint64_t)*p * XXH_P5;
        h = rotl64(h, 11) * XXH_P1;
    }
    h ^= h >> 33;
    h *= XXH_P2;
    h ^= h >> 29;
    h *= XXH_P3;
    h ^= h >> 32;
    return h;
}

uint64_t fj_fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

fj_hash128 fj_hash128_of(const void *data, size_t len)
{
    fj_hash128 h = {fj_xxh64(data, len, 0), fj_fnv1a64(data, len)};
    return h;
}

void fj_hash128_hex(fj_hash128 h, char *out)
{
    snprintf(out, FJ_HASH128_HEX_SIZE, "%016llx%016llx", (unsigned long long)h.hi, (unsigned long long)h.lo);
}

uint64_t fj_checksum64(const void *data, size_t len) { return fj_xxh64(data, len, 0); }

uint64_t fj_source_hash(const void *data, size_t len)
{
    uint64_t h = fj_xxh64(data, len, 0);
    return h ? h : 1;
}
