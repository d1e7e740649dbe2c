/*
 * prebuilt_none.c - the empty prebuilt blob: linked by the generator of the real one (tools/prebuilt) and by
 * builds with FAJIT_PREBUILT=OFF, where every kernel comes from the disk cache or the compiler.
 */
#include <stddef.h>

extern const unsigned char fj_prebuilt_data[];
extern const size_t fj_prebuilt_data_size;

const unsigned char fj_prebuilt_data[1] = {0};
const size_t fj_prebuilt_data_size = 0;
