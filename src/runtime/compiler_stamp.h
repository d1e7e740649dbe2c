/*
 * compiler_stamp.h - the compiler identity of a disk-cache key, without loading the compiler (compiler_stamp.c).
 */
#ifndef FJ_COMPILER_STAMP_H
#define FJ_COMPILER_STAMP_H

#include <stddef.h>

#include "disk_cache.h"
#include "fajit.h"

struct fj_plan;

/*
 * The identity of the compiler plan's path uses ("NVRTC 13.0 whole-program", "nvJitLink 13.0"), as
 * fj_compiler_identity_for gives it, but read from cache's stamp when this process has not loaded that
 * compiler and the stamp still matches the library file it names. Loads the compiler (and writes the
 * stamp) only when there is no valid stamp. With the cache off it is fj_compiler_identity_for. Followed by the
 * library file's name and size, " (libnvJitLink.so.13, 98806736 B)", when the file is known: the version
 * a library reports does not change with a patch release.
 */
fajit_status fj_compiler_identity_stamped(fj_disk_cache *cache, const struct fj_plan *plan, char *buf, size_t size);

/* The same identity when it costs no library load: from a valid stamp, or from the compiler when this process
 * has loaded it already. 1 = in buf; 0 = only loading the compiler would tell (nothing is loaded). The kernel
 * store's probes that must not wait (a CUDA-graph capture, a call that can run a stand-in) use it. */
int fj_compiler_identity_cheap(fj_disk_cache *cache, const struct fj_plan *plan, char *buf, size_t size);

/* The disk-cache key of a kernel: its canonical config text (fj_plan_format), the sm it is built for and
 * the stamped identity of the compiler its plan's path uses. The one place a kernel's key is made: the
 * context (loading) and fajit_warm (compiling to disk without a device) must agree on it. */
fajit_status fj_kernel_disk_key(fj_disk_cache *cache, const struct fj_plan *plan, const char *config_text,
                                const char *target, char *key, size_t size);

/* fj_kernel_disk_key when it costs no library load (fj_compiler_identity_cheap): 1 = the key is in key[size];
 * 0 = only loading the compiler would tell (or the key does not fit). */
int fj_kernel_disk_key_cheap(fj_disk_cache *cache, const struct fj_plan *plan, const char *config_text,
                             const char *target, char *key, size_t size);

#endif
