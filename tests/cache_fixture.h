/*
 * cache_fixture.h - the cmocka fixture the disk-cache tests share (test_cache.c, test_cache_abuse.c): a
 * cache, on, in a fresh temporary directory of mode 0755, removed with everything in it afterwards.
 */
#ifndef FJ_CACHE_FIXTURE_H
#define FJ_CACHE_FIXTURE_H

#include "runtime/disk_cache.h"

typedef struct fixture {
    char *root;
    fj_disk_cache cache;
} fixture;

int fj_cache_fixture_setup(void **state);
int fj_cache_fixture_teardown(void **state);

/* A cmocka test entry that runs fn in the fixture. */
#define FJ_CACHE_TEST(fn) cmocka_unit_test_setup_teardown(fn, fj_cache_fixture_setup, fj_cache_fixture_teardown)

#endif
