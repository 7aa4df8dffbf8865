/*
 * `falcon stability`: saved streams (results and resume states).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../bench/buildinfo.h" /* the build identity of saved streams */
#include "falcon_io.h"
#include "falcon_advanced.h"
#include "stab.h"

/* ---- saved streams: results (streams/NNN.res) and resume states (resume/NNN.*) ----
 *
 * Every run writes each finished stream to OUT/streams/NNN.res (NNN: the
 * stream's index in output order): a key naming the study's parameters,
 * then the stream's results. `falcon-study merge` reads these back, from
 * any number of shards, and writes what one process would have written.
 * While a stream runs past the MPFR range (beyond it, the MPFR prefix is no
 * longer needed), its whole state is saved every P->every seconds: the
 * kernels' states as checkpoints (OUT/resume/cCC/NNN for curve CC,
 * falcon_checkpoint format; one parent directory per checkpoint, as a
 * commit locks each directory output's parent with its own flock, and two
 * in one parent would wait on each other), and OUT/resume/NNN.state with the loop's position, the error
 * accumulators, the points so far, the long-double reference's state and a
 * hash of each kernel state. All of a save is one output transaction
 * (falcon_outputs_*): a kill leaves the previous save whole. If a kill
 * lands inside the commit's renames (files first, then directories), the
 * hashes no longer match the checkpoints and --resume restarts that stream
 * from step 0 instead of continuing from a mixed state.
 * The files are in this machine's binary layout (the key records the sizes):
 * merge shards on machines of one architecture and compiler. The key also
 * names the build that wrote the file (stab_build_identity): a build with the
 * same layout may still compute other numbers, so --resume reruns a stream
 * another build saved, and merge refuses to mix builds. */

/* This build: the library's version and bench/buildinfo.c's facts (the
 * revision, "-dirty." and a hash of uncommitted changes, the compiler and the flags;
 * mk/bench.mk rebuilds it when one changes). Nothing of the run goes in:
 * one build always writes the same identity. One too long for the key
 * keeps its start and ends in a hash of the whole, so it still differs. */
void stab_build_identity(char *id, size_t len)
{
    const char *const part[] = {FALCON_VERSION, fb_build_git_revision, fb_build_cc, fb_build_cflags};
    const int n = snprintf(id, len, "falcon %s, revision %s, %s, %s", part[0], part[1], part[2], part[3]);
    if (n >= 0 && (size_t)n < len) return;
    uint64_t h = STUDY_FNV_BASIS;
    for (int i = 0; i < 4; i++) h = study_fnv1a(h, part[i], strlen(part[i]) + 1);
    snprintf(id + len - 20, 20, " #%016llx", (unsigned long long)h);
}

static const char no_build[] = "written by an earlier build, before results named their build: taken as "
                               "another build's";

/* Is a saved key not this run's? Then why is in buf: an earlier format,
 * another build (both named) or other parameters. */
int stab_key_mismatch(const run_key *key, const run_key *want, char *buf, size_t len)
{
    if (!strncmp(key->magic, KEY_MAGIC_NO_BUILD, sizeof key->magic)) snprintf(buf, len, "%s", no_build);
    else if (strncmp(key->magic, KEY_MAGIC, sizeof key->magic) || !memchr(key->build, 0, sizeof key->build))
        snprintf(buf, len, "not a stream file of this format");
    else if (strcmp(key->build, want->build))
        snprintf(buf, len, "written by another build, %s; this one is %s", key->build, want->build);
    else if (memcmp(key, want, sizeof *key)) snprintf(buf, len, "written by a study with other parameters");
    else return 0;
    return 1;
}

void stab_make_key(const params *P, int index, run_key *k)
{
    memset(k, 0, sizeof *k);
    snprintf(k->magic, sizeof k->magic, "%s", KEY_MAGIC);
    stab_build_identity(k->build, sizeof k->build);
    k->key_size = sizeof *k, k->stream_size = sizeof(stream), k->ld_size = sizeof(long double);
    snprintf(k->profile, sizeof k->profile, "%s", P->profile);
    k->n = P->n, k->m = P->m, k->W = P->W, k->C = P->C, k->tmax = P->tmax, k->tmax_par = P->tmax_par;
    k->tmpfr = P->tmpfr, k->seg = P->seg, k->tfit = P->tfit, k->tmax_other = P->tmax_other;
    k->only_backend = P->only_backend, k->skipmask = P->skipmask, k->nstream = P->nstream, k->index = index;
    k->formats = P->formats;
    for (int i = 0; i < P->nstream; i++)
        k->list[i][0] = P->sprec[i], k->list[i][1] = P->svar[i], k->list[i][2] = P->sdecay[i];
}

typedef struct buf {
    unsigned char *p;
    size_t len, cap;
    int bad;
} buf;

static void put(buf *b, const void *x, size_t n)
{
    if (b->bad) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->bad = 1;
            return;
        }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->len, x, n);
    b->len += n;
}

/* Read n bytes from *p (left bytes remain); -1 when the data is short. */
static int take(const unsigned char **p, size_t *left, void *x, size_t n)
{
    if (*left < n) return -1;
    memcpy(x, *p, n);
    *p += n, *left -= n;
    return 0;
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *p = malloc(cap);
    while (p) {
        n += fread(p + n, 1, cap - n, f);
        if (n < cap) break;
        unsigned char *q = realloc(p, cap *= 2);
        if (!q) free(p);
        p = q;
    }
    if (ferror(f)) free(p), p = NULL;
    fclose(f);
    *len = n;
    return p;
}

/* Write the bytes to path through an output transaction (with the other
 * outputs already declared in tx); commits or aborts tx. */
static int commit_with(falcon_outputs *tx, int slot, const buf *b)
{
    const int fd = falcon_outputs_fd(tx, slot);
    size_t off = 0;
    while (fd >= 0 && off < b->len) {
        const ssize_t w = write(fd, b->p + off, b->len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    if (b->bad || off < b->len) {
        fprintf(stderr, "falcon: error: cannot write %s: %s\n", falcon_outputs_path(tx, slot),
                b->bad ? "out of memory" : strerror(errno));
        falcon_outputs_abort(tx);
        return -1;
    }
    if (falcon_outputs_commit(tx)) {
        fprintf(stderr, "falcon: error: %s\n", falcon_last_error());
        return -1;
    }
    return 0;
}

static uint64_t state_hash(const falcon_state *st)
{
    const falcon_state_view v = falcon_state_get_view(st);
    uint64_t h = STUDY_FNV_BASIS;
    h = study_fnv1a(h, v.S, sizeof(double) * (size_t)(v.heads * v.m * v.n));
    h = study_fnv1a(h, v.prev_key, sizeof(double) * (size_t)(v.heads * v.n));
    h = study_fnv1a(h, v.has_prev, (size_t)v.heads);
    h = study_fnv1a(h, v.hist_k, sizeof(double) * (size_t)(v.heads * v.keep * v.n));
    h = study_fnv1a(h, v.hist_v, sizeof(double) * (size_t)(v.heads * v.keep * v.m));
    h = study_fnv1a(h, v.hist_len, sizeof(int64_t) * (size_t)v.heads);
    return study_fnv1a(h, falcon_state_scale(st), sizeof(double) * (size_t)v.heads);
}

void stab_path_of(const params *P, char *path, size_t len, const char *sub, int idx, const char *suffix, int k)
{
    (void)suffix;
    if (k >= 0) snprintf(path, len, "%s/%s/c%02d/%03d", P->out, sub, k, idx);
    else snprintf(path, len, "%s/%s/%03d%s", P->out, sub, idx, suffix);
}

/* The curves whose kernel state a save holds: those still running. */
static int curve_live(const curve *k, int64_t t) { return t < k->tmax && !k->error[0]; }

int stab_save_state(const params *P, int idx, const stream *s, const position *pos, const ldref *ld)
{
    char path[4096];
    int nlive = 0;
    for (int i = 0; i < s->ncurve; i++) nlive += curve_live(&s->c[i], pos->t);
    if (nlive + 1 > 16) return 0; /* more than one transaction holds: not saved (MAXCURVE allows 16 curves) */
    falcon_outputs *tx;
    int fslot, slot;
    if (falcon_outputs_begin(&tx)) return -1;
    stab_path_of(P, path, sizeof path, "resume", idx, ".state", -1);
    buf b = {0};
    run_key key;
    stab_make_key(P, idx, &key);
    put(&b, &key, sizeof key), put(&b, pos, sizeof *pos), put(&b, s, sizeof *s);
    const int64_t n = ld->n, m = ld->m, W = ld->W;
    put(&b, ld->S, sizeof(long double) * (size_t)(m * n)), put(&b, ld->prev, sizeof(double) * (size_t)n);
    put(&b, &ld->has_prev, sizeof ld->has_prev), put(&b, &ld->hlen, sizeof ld->hlen);
    put(&b, ld->hk, sizeof(double) * (size_t)(W * n)), put(&b, ld->hv, sizeof(double) * (size_t)(W * m));
    falcon_status st = falcon_outputs_file(tx, "resume state", path, &fslot);
    for (int i = 0; i < s->ncurve && !st; i++) {
        if (!curve_live(&s->c[i], pos->t)) continue;
        const uint64_t h = state_hash(s->c[i].st);
        put(&b, &i, sizeof i), put(&b, &h, sizeof h);
        snprintf(path, sizeof path, "%s/resume/c%02d", P->out, i);
        if (study_mkdir(path)) {
            falcon_outputs_abort(tx);
            free(b.p);
            return -1;
        }
        stab_path_of(P, path, sizeof path, "resume", idx, ".k", i);
        if (!(st = falcon_outputs_checkpoint(tx, "resume checkpoint", path, &slot)))
            st = falcon_checkpoint_save_to(tx, slot, s->c[i].st);
    }
    if (st) {
        fprintf(stderr, "falcon: error: saving stream %d: %s\n", idx, falcon_last_error());
        falcon_outputs_abort(tx);
        free(b.p);
        return -1;
    }
    const int rc = commit_with(tx, fslot, &b);
    free(b.p);
    return rc;
}

/* The same curves, in the same order, with the same lengths. */
int stab_same_stream(const stream *a, const stream *b)
{
    if (a->prec != b->prec || a->variant != b->variant || a->decay != b->decay || a->ncurve != b->ncurve) return 0;
    for (int i = 0; i < a->ncurve; i++)
        if (a->c[i].backend != b->c[i].backend || a->c[i].form != b->c[i].form || a->c[i].tmax != b->c[i].tmax ||
            a->c[i].prec != b->c[i].prec)
            return 0;
    return 1;
}

/* The counts a saved stream carries index its arrays: within them (at most
 * `upto` points a curve, and a terminated error text), or the file is not
 * used. A file is never trusted to index memory. */
static int counts_ok(const stream *s, int upto)
{
    if (s->ncurve < 0 || s->ncurve > MAXCURVE || s->ncheck < 0 || s->ncheck > upto) return 0;
    for (int i = 0; i < s->ncurve; i++)
        if (s->c[i].npts < 0 || s->c[i].npts > upto || memchr(s->c[i].error, 0, sizeof s->c[i].error) == NULL)
            return 0;
    return 1;
}

int stab_result_ok(const stream *s) { return counts_ok(s, MAXPTS); }

/* Continue stream idx from its saved state: 1 done, 0 no usable state (a
 * message says why when one exists), -1 no memory. */
int stab_load_state(const params *P, int idx, stream *s, position *pos, ldref *ld)
{
    char path[4096];
    size_t len;
    stab_path_of(P, path, sizeof path, "resume", idx, ".state", -1);
    unsigned char *data = read_all(path, &len);
    if (!data) return 0;
    const unsigned char *p = data;
    size_t left = len;
    run_key key, want;
    char other[1200];
    stream *saved = malloc(sizeof *saved);
    falcon_state *sts[MAXCURVE] = {0};
    const char *why = NULL;
    const int64_t n = ld->n, m = ld->m, W = ld->W;
    long double *S = malloc(sizeof(long double) * (size_t)(m * n));
    double *prev = malloc(sizeof(double) * (size_t)n), *hk = malloc(sizeof(double) * (size_t)(W * n));
    double *hv = malloc(sizeof(double) * (size_t)(W * m));
    int has_prev;
    int64_t hlen;
    stab_make_key(P, idx, &want);
    int nomem = 0; /* the one failure that ends the run rather than restarting the stream */
    if (!saved || !S || !prev || !hk || !hv) why = "out of memory", nomem = 1;
    else if (take(&p, &left, &key, sizeof key))
        why = "truncated or not a stream state";
    else if (stab_key_mismatch(&key, &want, other, sizeof other))
        why = other;
    else if (take(&p, &left, pos, sizeof *pos) || take(&p, &left, saved, sizeof *saved) || !stab_same_stream(saved, s) ||
             take(&p, &left, S, sizeof(long double) * (size_t)(m * n)) || take(&p, &left, prev, sizeof(double) * (size_t)n) ||
             take(&p, &left, &has_prev, sizeof has_prev) || take(&p, &left, &hlen, sizeof hlen) ||
             take(&p, &left, hk, sizeof(double) * (size_t)(W * n)) || take(&p, &left, hv, sizeof(double) * (size_t)(W * m)))
        why = "truncated or not a stream state";
    /* one point a curve per checkpoint passed: a position past the grid or
     * counts beyond it would index past the arrays as the run goes on */
    else if (pos->t < 0 || pos->t > P->tmax || pos->seg < 0 || pos->ci < 0 || pos->ci > MAXPTS ||
             !counts_ok(saved, pos->ci))
        why = "its counts are out of range (damaged, or not a stream state)";
    for (int i = 0; i < s->ncurve && !why; i++) {
        if (!curve_live(&saved->c[i], pos->t)) continue;
        int j;
        uint64_t h;
        if (take(&p, &left, &j, sizeof j) || take(&p, &left, &h, sizeof h) || j != i) {
            why = "truncated or not a stream state";
            break;
        }
        stab_path_of(P, path, sizeof path, "resume", idx, ".k", i);
        const falcon_status ls = falcon_checkpoint_load(path, &sts[i]);
        if (ls) why = falcon_last_error(), nomem = ls == FALCON_E_NOMEM;
        else if (state_hash(sts[i]) != h) why = "a kernel checkpoint is not the one this state was saved with";
    }
    if (!why && left) why = "longer than a stream state";
    if (!why) {
        for (int i = 0; i < s->ncurve; i++) {
            saved->c[i].st = sts[i] ? sts[i] : s->c[i].st;
            if (sts[i]) falcon_state_free(s->c[i].st);
        }
        *s = *saved;
        memcpy(ld->S, S, sizeof(long double) * (size_t)(m * n)), memcpy(ld->prev, prev, sizeof(double) * (size_t)n);
        memcpy(ld->hk, hk, sizeof(double) * (size_t)(W * n)), memcpy(ld->hv, hv, sizeof(double) * (size_t)(W * m));
        ld->has_prev = has_prev, ld->hlen = hlen;
    } else {
        for (int i = 0; i < MAXCURVE; i++) falcon_state_free(sts[i]);
        fprintf(stderr, "  stream %d: saved state %s not used (%s): it starts from step 0\n", idx, path, why);
    }
    free(data), free(saved), free(S), free(prev), free(hk), free(hv);
    return why ? (nomem ? -1 : 0) : 1;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path) && errno != ENOENT ? -1 : 0;
}

/* Remove stream idx's resume state (the state file first: without it the
 * checkpoints are never read). */
void stab_drop_state(const params *P, int idx, int ncurve)
{
    char path[4096];
    stab_path_of(P, path, sizeof path, "resume", idx, ".state", -1);
    unlink(path);
    for (int i = 0; i < ncurve; i++) {
        stab_path_of(P, path, sizeof path, "resume", idx, ".k", i);
        nftw(path, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    }
}

/* Remove what a killed process left of stream idx's transactions (their
 * temporaries "*.tmp-XXXXXX", which a SIGKILL gives no chance to remove):
 * only this stream's, so that other processes writing into the same
 * directory keep theirs. */
void stab_drop_temps(const params *P, int idx)
{
    char pat[4200];
    glob_t g;
    const char *const forms[] = {"%s/streams/%03d.res.tmp-*", "%s/resume/%03d.state.tmp-*", "%s/resume/c[0-9][0-9]/%03d.tmp-*"};
    for (int f = 0; f < 3; f++) {
        snprintf(pat, sizeof pat, forms[f], P->out, idx);
        if (glob(pat, GLOB_NOSORT, NULL, &g)) continue;
        for (size_t i = 0; i < g.gl_pathc; i++) nftw(g.gl_pathv[i], rm_entry, 8, FTW_DEPTH | FTW_PHYS);
        globfree(&g);
    }
}

/* A finished stream's results, atomically. */
int stab_save_result(const params *P, int idx, const stream *s)
{
    char path[4096];
    falcon_outputs *tx;
    int slot;
    stab_path_of(P, path, sizeof path, "streams", idx, ".res", -1);
    if (falcon_outputs_begin(&tx)) return -1;
    if (falcon_outputs_file(tx, "stream result", path, &slot)) {
        fprintf(stderr, "falcon: error: %s\n", falcon_last_error());
        falcon_outputs_abort(tx);
        return -1;
    }
    buf b = {0};
    run_key key;
    stab_make_key(P, idx, &key);
    stream copy = *s;
    for (int i = 0; i < copy.ncurve; i++) copy.c[i].st = NULL;
    put(&b, &key, sizeof key), put(&b, &copy, sizeof copy);
    const int rc = commit_with(tx, slot, &b);
    free(b.p);
    return rc;
}

/* Read a result file: its key and stream. 0, or -1 with why. */
int stab_load_result(const char *path, run_key *key, stream *s, const char **why)
{
    size_t len;
    unsigned char *data = read_all(path, &len);
    const unsigned char *p = data;
    size_t left = len;
    *why = NULL;
    if (!data) *why = strerror(errno);
    else if (left >= sizeof key->magic && !strncmp((const char *)p, KEY_MAGIC_NO_BUILD, sizeof key->magic))
        *why = no_build;
    else if (take(&p, &left, key, sizeof *key) || strcmp(key->magic, KEY_MAGIC) || key->key_size != sizeof *key ||
             key->stream_size != sizeof *s || key->ld_size != sizeof(long double) || !memchr(key->build, 0, sizeof key->build))
        *why = "not a stream result of this build (another format or machine layout)";
    else if (take(&p, &left, s, sizeof *s) || left)
        *why = "truncated or too long";
    else
        for (int i = 0; i < s->ncurve; i++) s->c[i].st = NULL;
    free(data);
    return *why ? -1 : 0;
}

