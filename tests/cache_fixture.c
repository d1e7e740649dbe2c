/*
 * cache_fixture.c - the disk-cache tests' fixture (cache_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <sys/stat.h>

#include "cache_fixture.h"
#include "test_support.h"

int fj_cache_fixture_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->root = fj_test_make_temp_dir("fajit-cache-");
    assert_non_null(f->root);
    assert_int_equal(chmod(f->root, 0755), 0); /* mkdtemp makes 0700; either is trusted */
    assert_int_equal(fj_disk_cache_init(&f->cache, 1, f->root), FAJIT_OK);
    assert_true(f->cache.enabled);
    *state = f;
    return 0;
}

int fj_cache_fixture_teardown(void **state)
{
    fixture *f = *state;
    fj_disk_cache_fini(&f->cache);
    fj_test_remove_dir(f->root);
    free(f->root);
    free(f);
    return 0;
}
