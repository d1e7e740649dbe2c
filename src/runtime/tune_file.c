/*
 * tune_file.c - the tuned-winners file: parse and format lines, a list keyed like the file, and the
 * locked read-merge-rename write (format and rules in tune_file.h). POSIX: flock, mkstemp, rename.
 */
#include "tune_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "disk_cache.h"
#include "base/error.h"

/* every path made from a context's tune path fits in the buffers below (FJ_DISK_CACHE_DIR_MAX) */
_Static_assert(FJ_DISK_CACHE_DIR_MAX + sizeof("/" FJ_TUNE_FILE_NAME ".tmp-XXXXXX") <= FJ_DISK_CACHE_PATH_MAX,
               "a cache directory of FJ_DISK_CACHE_DIR_MAX characters leaves room for the tune file's paths");

#define FIELD_SEP " | "
#define MAX_FIELDS 7
/* The TFLOP/s a line may hold; written with one decimal from 1 up, three below, so what is read is
 * written back as a value that reads again (fuzz_tune_file: 0.04 was written as 0.0, then refused) */
#define TFLOPS_MIN 0.01
#define TFLOPS_MAX 100000.0

/* ---------------------------------------------------------------------------------------------------
 * Text helpers
 * ------------------------------------------------------------------------------------------------- */
/* Characters a field cannot hold: they become spaces. */
static int field_blank(unsigned char ch) { return ch == '|' || ch < 0x20 || ch == 0x7f; }
/* What may come before a line's first character (which then decides whether it is a comment). */
static int line_blank(unsigned char ch) { return ch == ' ' || (ch != '|' && field_blank(ch)); }

void fj_tune_clean_text(char *dst, size_t size, const char *src)
{
    size_t n = 0;
    if (size == 0) return;
    while (*src && (*src == ' ' || field_blank((unsigned char)*src))) src++; /* what becomes a space, too */
    for (; *src && n + 1 < size; src++) {
        unsigned char ch = (unsigned char)*src;
        dst[n++] = field_blank(ch) ? ' ' : (char)ch;
    }
    while (n > 0 && dst[n - 1] == ' ') n--;
    dst[n] = '\0';
}

int fj_tune_key_equal(const fj_tune_key *a, const fj_tune_key *b)
{
    return strcmp(a->gpu, b->gpu) == 0 && a->driver == b->driver && strcmp(a->codegen, b->codegen) == 0 &&
           a->dtype == b->dtype && a->head_dim == b->head_dim && a->causal == b->causal &&
           a->seqlen_class == b->seqlen_class && a->decode == b->decode && a->kv_heads == b->kv_heads &&
           a->group == b->group && a->seqlen_q == b->seqlen_q && a->packed == b->packed;
}

static const char *dtype_text(fajit_dtype d)
{
    return d == FAJIT_DTYPE_F16 ? "f16" : d == FAJIT_DTYPE_E4M3 ? "e4m3" : "bf16";
}

static int dtype_parse(const char *text, fajit_dtype *out)
{
    if (strcmp(text, "f16") == 0) *out = FAJIT_DTYPE_F16;
    else if (strcmp(text, "bf16") == 0) *out = FAJIT_DTYPE_BF16;
    else if (strcmp(text, "e4m3") == 0) *out = FAJIT_DTYPE_E4M3;
    else return -1;
    return 0;
}

/* A whole decimal int in [lo, hi] (no sign, no blanks). */
static int int_parse(const char *text, int lo, int hi, int *out)
{
    char *end = NULL;
    if (text[0] < '0' || text[0] > '9') return -1;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (*end != '\0' || errno == ERANGE || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Parse and format
 * ------------------------------------------------------------------------------------------------- */
const char *fj_tune_parse_config(const char *text, fajit_config *c)
{
    char arch[16], dt[32], sw[8], mask[16];
    int n = 0, m = 0;
    memset(c, 0, sizeof *c);
    if (sscanf(text, " %15s %31s d%d br%d bc%d s%d sw%7s w%d %n", arch, dt, &c->head_dim, &c->block_m, &c->block_n,
               &c->stages, sw, &c->warps, &n) != 8)
        return "config is not in canonical form (sm_80 bf16 d128 br64 bc64 s2 sw128 w4 noncausal)";
    c->col_warps = 1;
    c->overlap = c->pingpong = -1; /* the schedule flags are written only when on */
    if (sscanf(text + n, "cw%d %n", &c->col_warps, &m) == 1) n += m; /* written only when > 1 */
    if (strncmp(text + n, "ov ", 3) == 0) c->overlap = 1, n += 3;
    if (strncmp(text + n, "pp ", 3) == 0) c->pingpong = 1, n += 3;
    if (strncmp(text + n, "roll ", 5) == 0) c->roll = 1, n += 5; /* written only when 1 (absent: 0, the default) */
    if (strncmp(text + n, "lpt ", 4) == 0) c->sched = 1, n += 4;  /* likewise */
    if (strncmp(text + n, "xt ", 3) == 0) c->cross_tile = 1, n += 3; /* likewise */
    if (strncmp(text + n, "acc ", 4) == 0) c->accurate = 1, n += 4;  /* likewise */
    if (sscanf(text + n, "%15s %n", mask, &m) != 1 || fj_config_parse_mods(text + n + m, &c->mods) != 0)
        return "config is not in canonical form (sm_80 bf16 d128 br64 bc64 s2 sw128 w4 noncausal [win cap sink alibi "
               "chunk])";
    const fj_arch_info *a = fj_arch_find(arch);
    if (!a || a->path == FAJIT_ARCH_AUTO) return "config: unknown code-generation path";
    c->arch = a->path;
    if (fj_config_parse_dtype(dt, c) != 0) return "config: dtype is not f16, bf16 or e4m3 (with ,kv=<dtype> / ,o=<dtype>)";
    if (strcmp(sw, "none") == 0) c->swizzle = FAJIT_SWIZZLE_NONE;
    else if (int_parse(sw, 1, 1024, &c->swizzle) != 0) return "config: swizzle is not none or a number";
    if (strcmp(mask, "causal") == 0) c->causal = 1;
    else if (strcmp(mask, "noncausal") == 0) c->causal = 0;
    else return "config: mask is not causal or noncausal";
    return NULL;
}

/* Split a line at '|' into at most MAX_FIELDS trimmed fields (in place). Returns the count, or -1. */
static int split_fields(char *line, char *fields[MAX_FIELDS])
{
    int n = 0;
    for (char *p = line;;) {
        char *bar = strchr(p, '|');
        if (n == MAX_FIELDS) return -1;
        if (bar) *bar = '\0';
        while (*p == ' ' || *p == '\t') p++;
        size_t len = strlen(p);
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) p[--len] = '\0';
        fields[n++] = p;
        if (!bar) return n;
        p = bar + 1;
    }
}

/* The class field "bf16 d128 causal n4096" into the key. */
static const char *parse_class(const char *text, fj_tune_key *k)
{
    char dt[8], mask[16];
    int n = 0;
    if (sscanf(text, "%7s d%d %15s n%d %n", dt, &k->head_dim, mask, &k->seqlen_class, &n) != 4 || text[n] != '\0')
        return "class is not \"<dtype> d<head dim> causal|noncausal n<seqlen class>\"";
    if (dtype_parse(dt, &k->dtype) != 0) return "class: dtype is not f16, bf16 or e4m3";
    if (strcmp(mask, "causal") == 0) k->causal = 1;
    else if (strcmp(mask, "noncausal") == 0) k->causal = 0;
    else return "class: mask is not causal or noncausal";
    if (k->seqlen_class < 1 || (k->seqlen_class & (k->seqlen_class - 1)) != 0)
        return "class: the sequence-length class is not a power of two";
    return NULL;
}

static int power_of_two(int v) { return v >= 1 && (v & (v - 1)) == 0; }

/* A decode class: "decode bf16 d128 noncausal bkv8 g4 q1 k131072 packed" (after "decode "). */
static const char *parse_decode_class(const char *text, fj_tune_key *k)
{
    char dt[8], mask[16], pack[16];
    int n = 0;
    if (sscanf(text, "%7s d%d %15s bkv%d g%d q%d k%d %15s %n", dt, &k->head_dim, mask, &k->kv_heads, &k->group,
               &k->seqlen_q, &k->seqlen_class, pack, &n) != 8 || text[n] != '\0')
        return "decode class is not \"decode <dtype> d<D> causal|noncausal bkv<B x Hkv> g<group> q<Nq> k<Nk> "
               "packed|unpacked\"";
    k->decode = 1;
    if (dtype_parse(dt, &k->dtype) != 0) return "decode class: dtype is not f16, bf16 or e4m3";
    if (strcmp(mask, "causal") == 0) k->causal = 1;
    else if (strcmp(mask, "noncausal") == 0) k->causal = 0;
    else return "decode class: mask is not causal or noncausal";
    if (strcmp(pack, "packed") == 0) k->packed = 1;
    else if (strcmp(pack, "unpacked") == 0) k->packed = 0;
    else return "decode class: packing is not packed or unpacked";
    if (k->head_dim < 16 || k->head_dim > 256 || k->head_dim % 16) return "decode class: head dim not 16..256, x16";
    if (!power_of_two(k->kv_heads) || !power_of_two(k->seqlen_q) || k->seqlen_q > 128 ||
        !power_of_two(k->seqlen_class) || k->seqlen_class < 128)
        return "decode class: bkv, q (<= 128) and k (>= 128) must be powers of two";
    if (k->group < 1 || k->group > 65535 || (k->packed && k->group < 2))
        return "decode class: group not 1..65535 (packed needs >= 2)";
    if (k->causal && k->seqlen_q == 1) return "decode class: causal with q1 (written noncausal)";
    return NULL;
}

/* A decode config: "splits 64 br64 bc64". */
static const char *parse_decode_config(const char *text, fj_tune_record *r)
{
    int n = 0;
    if (sscanf(text, "splits %d br%d bc%d %n", &r->splits, &r->tile_m, &r->tile_n, &n) != 3 || text[n] != '\0')
        return "decode config is not \"splits <S> br<M> bc<N>\"";
    if (r->splits < 1 || r->splits > FAJIT_MAX_SPLITS) return "decode config: splits not 1..FAJIT_MAX_SPLITS";
    if (r->tile_m < 16 || r->tile_m > 256 || r->tile_m % 16 || r->tile_n < 16 || r->tile_n > 256 || r->tile_n % 16)
        return "decode config: br and bc must be 16..256, multiples of 16";
    return NULL;
}

/* The config must be for the class and follow every rule of its path. */
static const char *check_config(fj_tune_record *r)
{
    fj_plan plan;
    if (r->cfg.dtype != r->key.dtype || r->cfg.head_dim != r->key.head_dim || r->cfg.causal != r->key.causal)
        return "config's dtype, head dim or mask differs from the class";
    if (fj_plan_build(&r->cfg, &plan) != FAJIT_OK) {
        fj_clear_error(); /* a bad line is not the caller's failure */
        return "config breaks a rule of its path";
    }
    /* the config as the plan reads it: "cw0" is col_warps 1 there, but 0 would mean "pick" to
     * fajit_config_fill's overlay, and it is written back as the plan reads it (fuzz_tune_file) */
    r->cfg = plan.cfg;
    return NULL;
}

const char *fj_tune_parse_line(const char *line, fj_tune_record *r)
{
    char buf[FJ_TUNE_LINE_MAX], *f[MAX_FIELDS], *end = NULL;
    const char *bad;
    const char *p = line;
    /* control characters too: the gpu field would lose them when cleaned, and a line written with a '#'
     * first would read back as a comment (fuzz_tune_file) */
    while (*p && line_blank((unsigned char)*p)) p++;
    if (*p == '#' || *p == '\0' || *p == '\n' || *p == '\r') return "comment";
    if (strlen(p) >= sizeof buf) return "line too long";
    snprintf(buf, sizeof buf, "%s", p);
    buf[strcspn(buf, "\r\n")] = '\0';
    memset(r, 0, sizeof *r);
    int n = split_fields(buf, f);
    if (n < 0) return "more than 7 fields separated by '|'";
    if (n < 6) return "fewer than 6 fields separated by '|'";
    /* cleaned as the writer and fj_tune_key_make clean them, so a line reads back as the key it was
     * written for (fuzz_tune_file: a control character in a name changed the key on the next merge) */
    if (strlen(f[0]) >= sizeof r->key.gpu) return "gpu name too long";
    fj_tune_clean_text(r->key.gpu, sizeof r->key.gpu, f[0]);
    if (!r->key.gpu[0]) return "gpu name empty";
    if (int_parse(f[1], 1, 1000000000, &r->key.driver) != 0) return "driver version is not a positive number";
    if (strlen(f[2]) >= sizeof r->key.codegen) return "codegen version too long";
    fj_tune_clean_text(r->key.codegen, sizeof r->key.codegen, f[2]);
    if (!r->key.codegen[0]) return "codegen version empty";
    if (strncmp(f[3], "decode ", 7) == 0) {
        if ((bad = parse_decode_class(f[3] + 7, &r->key)) != NULL) return bad;
        if ((bad = parse_decode_config(f[4], r)) != NULL) return bad;
    } else {
        if ((bad = parse_class(f[3], &r->key)) != NULL) return bad;
        if ((bad = fj_tune_parse_config(f[4], &r->cfg)) != NULL) return bad;
        if ((bad = check_config(r)) != NULL) return bad;
    }
    errno = 0;
    r->tflops = strtod(f[5], &end);
    if (end == f[5] || *end != '\0' || errno == ERANGE || !isfinite(r->tflops) || r->tflops < TFLOPS_MIN ||
        r->tflops > TFLOPS_MAX)
        return "TFLOP/s is not a number in 0.01..100000";
    if (n == 7) fj_tune_clean_text(r->note, sizeof r->note, f[6]);
    return NULL;
}

/* The class and config fields of a record. */
static void format_class_config(const fj_tune_record *r, char *cls, size_t cls_size, char *cfg, size_t cfg_size)
{
    const fj_tune_key *k = &r->key;
    const char *mask = k->causal ? "causal" : "noncausal";
    if (!k->decode) {
        snprintf(cls, cls_size, "%s d%d %s n%d", dtype_text(k->dtype), k->head_dim, mask, k->seqlen_class);
        fajit_config_format(&r->cfg, cfg, cfg_size);
        return;
    }
    snprintf(cls, cls_size, "decode %s d%d %s bkv%d g%d q%d k%d %s", dtype_text(k->dtype), k->head_dim, mask,
             k->kv_heads, k->group, k->seqlen_q, k->seqlen_class, k->packed ? "packed" : "unpacked");
    snprintf(cfg, cfg_size, "splits %d br%d bc%d", r->splits, r->tile_m, r->tile_n);
}

int fj_tune_format_line(const fj_tune_record *r, char *buf, size_t size)
{
    char cls[128], cfg[128], gpu[FJ_TUNE_GPU_MAX], codegen[FJ_TUNE_CODEGEN_MAX], note[FJ_TUNE_NOTE_MAX];
    format_class_config(r, cls, sizeof cls, cfg, sizeof cfg);
    fj_tune_clean_text(gpu, sizeof gpu, r->key.gpu);
    fj_tune_clean_text(codegen, sizeof codegen, r->key.codegen);
    fj_tune_clean_text(note, sizeof note, r->note);
    return snprintf(buf, size, "%s" FIELD_SEP "%d" FIELD_SEP "%s" FIELD_SEP "%s" FIELD_SEP "%s" FIELD_SEP "%.*f%s%s",
                    gpu, r->key.driver, codegen, cls, cfg, r->tflops >= 1.0 ? 1 : 3, r->tflops,
                    note[0] ? FIELD_SEP : "", note);
}

/* ---------------------------------------------------------------------------------------------------
 * The list
 * ------------------------------------------------------------------------------------------------- */
/* The list is kept sorted by key (key_compare), keys unique: put and find are binary searches, and a file
 * of n lines reads in O(n log n) (fj_tune_stream_read sorts what it read once; a linear search per line
 * made 20k lines take 76 s). */
static int key_compare(const fj_tune_key *a, const fj_tune_key *b)
{
    int c = strcmp(a->gpu, b->gpu);
    if (c == 0) c = (a->driver > b->driver) - (a->driver < b->driver);
    if (c == 0) c = strcmp(a->codegen, b->codegen);
    if (c == 0) c = (int)a->dtype - (int)b->dtype;
    if (c == 0) c = (a->head_dim > b->head_dim) - (a->head_dim < b->head_dim);
    if (c == 0) c = a->causal - b->causal;
    if (c == 0) c = a->decode - b->decode;
    if (c == 0) c = (a->kv_heads > b->kv_heads) - (a->kv_heads < b->kv_heads);
    if (c == 0) c = (a->group > b->group) - (a->group < b->group);
    if (c == 0) c = (a->seqlen_q > b->seqlen_q) - (a->seqlen_q < b->seqlen_q);
    if (c == 0) c = a->packed - b->packed;
    if (c == 0) c = (a->seqlen_class > b->seqlen_class) - (a->seqlen_class < b->seqlen_class);
    return c;
}

/* 1 and *pos = its index when the key is there, else 0 and *pos = where it goes. */
static int list_search(const fj_tune_list *l, const fj_tune_key *key, int *pos)
{
    int lo = 0, hi = l->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = key_compare(&l->v[mid].key, key);
        if (c == 0) return *pos = mid, 1;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    *pos = lo;
    return 0;
}

static int list_reserve(fj_tune_list *l, int n)
{
    if (n <= l->cap) return 0;
    int cap = l->cap ? l->cap : 16;
    while (cap < n) {
        if (cap > INT_MAX / 2) return -1;
        cap *= 2;
    }
    fj_tune_record *v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) return -1;
    l->v = v;
    l->cap = cap;
    return 0;
}

int fj_tune_list_put(fj_tune_list *l, const fj_tune_record *rec)
{
    int pos = 0;
    if (list_search(l, &rec->key, &pos)) {
        l->v[pos] = *rec;
        return 0;
    }
    if (l->n == INT_MAX || list_reserve(l, l->n + 1) != 0) return -1;
    memmove(&l->v[pos + 1], &l->v[pos], (size_t)(l->n - pos) * sizeof *l->v);
    l->v[pos] = *rec;
    l->n++;
    return 0;
}

const fj_tune_record *fj_tune_list_find(const fj_tune_list *l, const fj_tune_key *key)
{
    int pos = 0;
    return list_search(l, key, &pos) ? &l->v[pos] : NULL;
}

void fj_tune_list_free(fj_tune_list *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Stable merge sort of the indices idx[0..n) by their records' keys (tmp: n more ints). */
static void index_sort(const fj_tune_record *v, int *idx, int *tmp, int n)
{
    for (int width = 1; width < n; width *= 2) {
        for (int lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = key_compare(&v[idx[j]].key, &v[idx[i]].key) < 0 ? idx[j++] : idx[i++];
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

/* Put the n records of `fresh` (in file order: a later one with the same key wins) into l: sort once,
 * keep the last of each key, merge the two sorted lists. 0, or -1 when out of memory. */
static int list_put_all(fj_tune_list *l, const fj_tune_record *fresh, int n)
{
    if (n == 0) return 0;
    if (l->n > INT_MAX - n) return -1;
    const int cap = l->n + n;
    int *idx = malloc(2 * (size_t)n * sizeof *idx);
    fj_tune_record *out = malloc((size_t)cap * sizeof *out);
    if (!idx || !out) {
        free(idx);
        free(out);
        return -1;
    }
    for (int i = 0; i < n; i++) idx[i] = i;
    index_sort(fresh, idx, idx + n, n);
    int m = 0, a = 0;
    for (int i = 0; i < n; i++) {
        if (i + 1 < n && key_compare(&fresh[idx[i]].key, &fresh[idx[i + 1]].key) == 0) continue; /* a later line wins */
        const fj_tune_record *r = &fresh[idx[i]];
        while (a < l->n && key_compare(&l->v[a].key, &r->key) < 0) out[m++] = l->v[a++];
        if (a < l->n && key_compare(&l->v[a].key, &r->key) == 0) a++; /* replaced */
        out[m++] = *r;
    }
    while (a < l->n) out[m++] = l->v[a++];
    free(idx);
    free(l->v);
    l->v = out;
    l->n = m;
    l->cap = cap;
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Reading and writing the file
 * ------------------------------------------------------------------------------------------------- */
/* The next line of f into buf without its newline: 1, 0 at the end of the file. *usable is 0 for a line no
 * writer of ours makes: longer than the buffer, or holding a NUL byte (fgets could not tell where such a
 * line ends, and took the next line for its rest). */
static int read_line(FILE *f, char *buf, size_t size, int *usable)
{
    size_t n = 0;
    int ch = EOF;
    *usable = 1;
    while ((ch = getc(f)) != EOF && ch != '\n') {
        if (ch == '\0' || n + 1 >= size) *usable = 0;
        else buf[n++] = (char)ch;
    }
    buf[n] = '\0';
    return ch != EOF || n > 0 || !*usable;
}

int fj_tune_stream_read(FILE *f, fj_tune_list *list, int *bad)
{
    char line[FJ_TUNE_LINE_MAX];
    fj_tune_list fresh = {0}; /* the records in file order, put into list at once (list_put_all) */
    fj_tune_record rec;
    int usable = 1, rc = 0;
    while (rc == 0 && read_line(f, line, sizeof line, &usable)) {
        if (!usable) {
            (*bad)++;
            continue;
        }
        const char *why = fj_tune_parse_line(line, &rec);
        if (why && strcmp(why, "comment") != 0) (*bad)++;
        if (why) continue;
        if (fresh.n == INT_MAX || list_reserve(&fresh, fresh.n + 1) != 0) rc = -1;
        else fresh.v[fresh.n++] = rec;
    }
    if (rc == 0) rc = list_put_all(list, fresh.v, fresh.n);
    fj_tune_list_free(&fresh);
    return rc == 0 && !ferror(f) ? 0 : -1;
}

/* Open path for reading if it is a regular file no larger than FJ_TUNE_FILE_MAX_BYTES: O_NOFOLLOW (a link
 * in its place is not ours: a symlink to /dev/zero made the reader loop forever) and O_NONBLOCK (a FIFO
 * made fopen block, with the context's lock held), then fstat. The file's bytes into *data (malloc'd, a
 * NUL after them): 0; 1 when there is no file; -1 with a reason in why. */
static int file_slurp(const char *path, char **data, size_t *size, char *why, size_t why_size)
{
    char ebuf[128];
    struct stat st;
    memset(&st, 0, sizeof st);
    *data = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 && errno == ENOENT) return 1;
    if (fd < 0 && errno == ELOOP) /* O_NOFOLLOW on a symbolic link */
        return snprintf(why, why_size, "%s is a symbolic link: not followed (the tune file must be a regular file "
                                       "that fajit wrote)", path), -1;
    if (fd < 0)
        return snprintf(why, why_size, "cannot open %s: %s", path, fj_errno_text(errno, ebuf, sizeof ebuf)), -1;
    const char *bad = NULL;
    if (fstat(fd, &st) != 0) bad = "cannot stat it";
    else if (S_ISDIR(st.st_mode)) bad = "it is a directory, not a regular file";
    else if (S_ISFIFO(st.st_mode)) bad = "it is a FIFO, not a regular file";
    else if (!S_ISREG(st.st_mode)) bad = "it is a device or socket, not a regular file";
    else if (st.st_size > FJ_TUNE_FILE_MAX_BYTES) bad = "it is larger than the tune file limit";
    char *buf = bad ? NULL : malloc((size_t)st.st_size + 2);
    if (!bad && !buf) bad = "out of memory";
    size_t n = 0, cap = bad ? 0 : (size_t)st.st_size + 1; /* one more byte: a file that grew is seen */
    while (!bad && n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) bad = "read failed";
        if (r <= 0) break;
        n += (size_t)r;
    }
    if (!bad && n > (size_t)st.st_size) bad = "it grew while being read"; /* a writer renames, never appends */
    close(fd);
    if (bad) {
        free(buf);
        return snprintf(why, why_size, "%s: %s (%lld bytes; at most %d)", path, bad, (long long)st.st_size,
                        FJ_TUNE_FILE_MAX_BYTES), -1;
    }
    buf[n] = '\0';
    *data = buf;
    *size = n;
    return 0;
}

int fj_tune_file_load(const char *path, fj_tune_list *list, int *bad, char *why, size_t why_size)
{
    char *data = NULL, scratch[8];
    size_t size = 0;
    int ignored = 0;
    if (bad) *bad = 0;
    if (!why) why = scratch, why_size = sizeof scratch;
    why[0] = '\0';
    int rc = file_slurp(path, &data, &size, why, why_size);
    if (rc != 0) return rc > 0 ? 0 : -1;
    FILE *f = size ? fmemopen(data, size, "r") : NULL;
    if (size && !f) rc = -1, snprintf(why, why_size, "%s: out of memory", path);
    if (f) {
        rc = fj_tune_stream_read(f, list, &ignored);
        if (rc != 0) snprintf(why, why_size, "%s: out of memory", path);
        fclose(f);
    }
    free(data);
    if (bad) *bad = ignored;
    return rc;
}

int fj_tune_file_read(const char *path, fj_tune_list *list, int *bad)
{
    return fj_tune_file_load(path, list, bad, NULL, 0);
}

static void write_header(FILE *f)
{
    fputs("# fajit tuned kernels (format 1), written by fajit_tune / fagen tune; safe to edit or delete.\n"
          "# A line is used only with the GPU, driver version and fajit code generator that measured it.\n"
          "# gpu | driver | codegen | class | config | TFLOP/s (decode lines: GB/s of K + V) | note\n",
          f);
}

/* Write the list to a temporary file in dir and rename it onto path. NULL, or the failing step. */
static const char *write_atomic(const char *path, const fj_tune_list *list)
{
    char tmp[FJ_DISK_CACHE_PATH_MAX], line[FJ_TUNE_LINE_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path) >= (int)sizeof tmp) return errno = ENAMETOOLONG, "path";
    int fd = mkstemp(tmp);
    if (fd < 0) return "create temporary file";
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int err = errno;
        close(fd);
        unlink(tmp);
        return errno = err, "open temporary file";
    }
    write_header(f);
    for (int i = 0; i < list->n; i++) {
        fj_tune_format_line(&list->v[i], line, sizeof line);
        fprintf(f, "%s\n", line);
    }
    const char *step = NULL;
    if (fflush(f) != 0 || ferror(f)) step = "write temporary file";
    else if (fchmod(fileno(f), 0644) != 0 || fsync(fileno(f)) != 0) step = "sync temporary file";
    int err = errno;
    if (fclose(f) != 0 && !step) step = "close temporary file", err = errno;
    if (!step && rename(tmp, path) != 0) step = "rename temporary file", err = errno;
    if (step) unlink(tmp);
    errno = err;
    return step;
}

/* mkdir -p the directory part of path. */
static int make_parent(const char *path)
{
    char dir[FJ_DISK_CACHE_PATH_MAX]; /* a context's tune path fits (FJ_DISK_CACHE_DIR_MAX) */
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return errno = ENAMETOOLONG, -1;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = '\0';
    return fj_disk_cache_mkdirs(dir);
}

/* Take an exclusive lock on path.lock (best effort: -1 if it cannot be had; the write goes on). */
static int lock_take(const char *path)
{
    char lock[FJ_DISK_CACHE_PATH_MAX];
    struct stat st;
    if (snprintf(lock, sizeof lock, "%s.lock", path) >= (int)sizeof lock) return -1;
    /* not through a link, never blocking on a FIFO, a regular file only */
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0644);
    if (fd < 0) return -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    while (flock(fd, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        close(fd);
        return -1;
    }
    return fd;
}

const char *fj_tune_file_merge(const char *path, const fj_tune_record *recs, int n, char *why, size_t why_size)
{
    fj_tune_list list = {0};
    const char *step = NULL;
    char read_why[FJ_DISK_CACHE_PATH_MAX + 128];
    int lock = -1, bad = 0;
    if (make_parent(path) != 0) step = "create directory";
    if (!step) lock = lock_take(path);
    if (!step && fj_tune_file_load(path, &list, &bad, read_why, sizeof read_why) != 0) {
        if (lock >= 0) close(lock);
        fj_tune_list_free(&list);
        if (why) snprintf(why, why_size, "read the existing file %s", read_why);
        return "read the existing file";
    }
    for (int i = 0; !step && i < n; i++)
        if (fj_tune_list_put(&list, &recs[i]) != 0) step = "allocate", errno = ENOMEM;
    if (!step) step = write_atomic(path, &list); /* the list is sorted by key */
    int err = errno;
    if (lock >= 0) close(lock); /* releases the flock */
    fj_tune_list_free(&list);
    if (step && why) {
        char ebuf[128];
        snprintf(why, why_size, "%s %s: %s", step, path, fj_errno_text(err, ebuf, sizeof ebuf));
    }
    return step;
}
