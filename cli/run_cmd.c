/*
 * `falcon run`: open the .npy inputs, check that their shapes agree with
 * q's, then run the sequence in segments of steps, the state carried from
 * one to the next, and write the outputs.
 *
 * q decides the shape: 2 dimensions [T,n] is one sequence, 4 dimensions
 * [B,T,H,n] a batch ([B,H,T,n] with --layout bhtd); every other tensor must
 * have the same leading dimensions. The kernels take [B][T][H][D]: a
 * head-first file is transposed segment by segment into (and the reads out
 * of) the same buffers, one head's steps at a time; --layout fla transposes
 * the state it writes and scales the reads.
 *
 * Inputs and the output may be larger than memory. Each input is opened with
 * falcon_npy_open, which checks its header and size and then reads ranges at
 * computed offsets; a segment is steps [t0, t1) of every tensor (for a batch,
 * one contiguous block of (t1 - t0) x H x D elements per b). Each segment is
 * run with falcon_run_from on the carried state, which checks its inputs
 * once (indices in messages count from the start of the sequence; a split
 * run equals one call: bitwise for the recurrent form, to rounding for the
 * others; the default
 * segment length is a multiple of the chunk or block so that it equals one
 * call there too) and its reads are written at their offsets into the
 * output's temporary file, whose header went in first. Memory is the
 * segment buffers (about 32 MiB by default, --segment to choose) and the
 * state, whatever T is.
 *
 * Outputs are one transaction (falcon_outputs, src/outputs.c): every output
 * path is checked and gets its temporary before anything is computed; the
 * reads go into --out's temporary segment by segment, the state and the
 * checkpoint into theirs at the end; then all are fsynced and renamed onto
 * their paths together, the checkpoint directory swapped last, with signals
 * blocked. A failure anywhere (a bad value in a late segment, a full disk)
 * leaves every earlier file as it was; every catchable terminating signal
 * and an exit() from a runtime library remove the temporaries.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "falcon_io.h"

enum { IN_Q, IN_K, IN_V, IN_BETA, IN_ALPHA, IN_GAIN, NUM_INPUTS };
typedef enum { TAIL_NONE, TAIL_N, TAIL_M } tail_kind; /* what follows the leading dims */

static const char *const input_names[NUM_INPUTS] = {"q", "k", "v", "beta", "alpha", "gain"};
static const tail_kind input_tails[NUM_INPUTS] = {TAIL_N, TAIL_N, TAIL_M, TAIL_NONE, TAIL_NONE, TAIL_N};

/* Buffers of all segments together, by default (--segment overrides). */
#define SEGMENT_BYTES ((int64_t)32 << 20)

/* The sizes q sets: lead = [T], [B,T,H] or (head-first) [B,H,T], as in the files. */
typedef struct dims {
    int batched, head_first;
    int nlead;
    int64_t lead[3];
    int64_t B, T, H, n, m;
} dims;

typedef struct run_ctx {
    cli_run_args args;
    falcon_config cfg;
    const char *paths[NUM_INPUTS];
    falcon_npy_reader *rd[NUM_INPUTS];
    falcon_array info[NUM_INPUTS]; /* the files' shapes (no data) */
    void *buf[NUM_INPUTS];         /* one segment of each, in the run's precision */
    dims d;
    falcon_state *state;
    int64_t seg;                   /* steps per segment */
    void *out;                     /* one segment of reads */
    void *scratch;                 /* head-first: one head's steps of a segment, in float64 at most */
    double scale;                  /* fla: the reads' scale; else 1 */
    int adaptive;                  /* segments sized for --progress */
    int64_t segments;              /* run so far */
    falcon_outputs *tx;            /* every output, committed together at the end */
    int slot_out, slot_state, slot_ckpt;
    falcon_npy_writer *writer;
    double seconds;                /* in falcon_run_from (its checks too) */
} run_ctx;

static falcon_dtype run_dtype(const run_ctx *c)
{
    return c->cfg.precision == FALCON_FP64 ? FALCON_DTYPE_F64 : FALCON_DTYPE_F32;
}

static size_t elem_size(const run_ctx *c) { return run_dtype(c) == FALCON_DTYPE_F64 ? 8 : 4; }

/* Elements per step of a tensor (its last dim). */
static int64_t width(const run_ctx *c, int i)
{
    return input_tails[i] == TAIL_N ? c->d.n : input_tails[i] == TAIL_M ? c->d.m : 1;
}

/* ---- inputs ---- */

/* "[4,3]", or "[4,m]" with a symbolic last dim. */
static const char *fmt_shape(const int64_t *shape, int ndim, const char *last, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (last && used < size) used += (size_t)snprintf(buf + used, size - used, "%s%s", ndim ? "," : "", last);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

/* Open every input: header, dtype, order and size are checked here, values
 * segment by segment. */
static int open_inputs(run_ctx *c)
{
    for (int i = 0; i < NUM_INPUTS; i++) {
        if (c->paths[i] && falcon_npy_open(c->paths[i], &c->rd[i], &c->info[i]))
            return cli_error("%s: %s", input_names[i], falcon_last_error());
    }
    return 0;
}

static int dims_from_q(run_ctx *c)
{
    const falcon_array *q = &c->info[IN_Q];
    dims *d = &c->d;
    char got[128];
    if (q->ndim != 2 && q->ndim != 4)
        return cli_error("q (%s): shape %s has %d dimensions; expected [T,n] for one sequence or [B,T,H,n] "
                         "for a batch", c->paths[IN_Q], fmt_shape(q->shape, q->ndim, NULL, got, sizeof got),
                         q->ndim);
    d->batched = q->ndim == 4;
    d->head_first = d->batched && c->args.layout == CLI_LAYOUT_BHTD;
    d->nlead = q->ndim - 1;
    memcpy(d->lead, q->shape, sizeof(int64_t) * (size_t)d->nlead);
    d->B = d->batched ? q->shape[0] : 1;
    d->T = d->batched ? q->shape[d->head_first ? 2 : 1] : q->shape[0];
    d->H = d->batched ? q->shape[d->head_first ? 1 : 2] : 1;
    d->n = q->shape[q->ndim - 1];
    return 0;
}

/* A batch read as [B,T,H,D] whose T is smaller than its H is more likely a
 * head-first array: one warning line that names the fix (the run goes on:
 * it may be what was meant). There is no option for H to compare with. */
static void warn_head_first(const run_ctx *c)
{
    const falcon_array *q = &c->info[IN_Q];
    char got[128];
    /* T = 0: head-first, it would have 0 heads, which no run has */
    if (!c->d.batched || c->d.head_first || c->d.T == 0 || c->d.T >= c->d.H) return;
    fprintf(stderr, "falcon: warning: %s has shape %s: read as [B,T,H,D] that is T = %lld, H = %lld; if it is "
            "head-first [B,H,T,D], pass --layout bhtd\n", c->paths[IN_Q],
            fmt_shape(q->shape, q->ndim, NULL, got, sizeof got), (long long)c->d.T, (long long)c->d.H);
}

/* "v (v.npy): shape [5,3] but q says T=4; expected [4,m]" */
static int shape_error(const run_ctx *c, int i)
{
    const falcon_array *a = &c->info[i];
    const dims *d = &c->d;
    const tail_kind tail = input_tails[i];
    char got[128], want[128], n[32], says[128];
    snprintf(n, sizeof n, "%lld", (long long)d->n);
    if (d->head_first)
        snprintf(says, sizeof says, "B=%lld, H=%lld, T=%lld", (long long)d->B, (long long)d->H, (long long)d->T);
    else if (d->batched)
        snprintf(says, sizeof says, "B=%lld, T=%lld, H=%lld", (long long)d->B, (long long)d->T, (long long)d->H);
    else
        snprintf(says, sizeof says, "T=%lld", (long long)d->T);
    if (tail == TAIL_N) snprintf(says + strlen(says), sizeof says - strlen(says), ", n=%lld", (long long)d->n);
    return cli_error("%s (%s): shape %s but q says %s; expected %s", input_names[i], c->paths[i],
                     fmt_shape(a->shape, a->ndim, NULL, got, sizeof got), says,
                     fmt_shape(d->lead, d->nlead, tail == TAIL_N ? n : tail == TAIL_M ? "m" : NULL, want,
                               sizeof want));
}

/* Every tensor has q's leading dims, then n, m or nothing; v sets m. */
static int check_shape(run_ctx *c, int i)
{
    const falcon_array *a = &c->info[i];
    const dims *d = &c->d;
    const tail_kind tail = input_tails[i];
    int ok = a->ndim == d->nlead + (tail != TAIL_NONE);
    for (int j = 0; ok && j < d->nlead; j++) ok = a->shape[j] == d->lead[j];
    if (ok && tail == TAIL_N) ok = a->shape[d->nlead] == d->n;
    if (ok && tail == TAIL_M) c->d.m = a->shape[d->nlead];
    return ok ? 0 : shape_error(c, i);
}

static int check_shapes(run_ctx *c)
{
    if (dims_from_q(c)) return CLI_FAIL;
    warn_head_first(c);
    for (int i = IN_K; i < NUM_INPUTS; i++)
        if (c->paths[i] && check_shape(c, i)) return CLI_FAIL;
    return 0;
}

/* The inputs of steps [t0, t0 + len): the segment buffers (or, with no
 * buffers yet, a stand-in pointer for each tensor given). */
static falcon_inputs make_inputs(const run_ctx *c, int64_t len)
{
    static const char present = 0;
    const void *p[NUM_INPUTS];
    for (int i = 0; i < NUM_INPUTS; i++) p[i] = !c->paths[i] ? NULL : c->buf[i] ? c->buf[i] : &present;
    const falcon_inputs in = {.B = c->d.B, .T = len, .H = c->d.H, .n = c->d.n, .m = c->d.m,
                              .q = p[IN_Q], .k = p[IN_K], .v = p[IN_V],
                              .beta = p[IN_BETA], .alpha = p[IN_ALPHA], .gain = p[IN_GAIN]};
    return in;
}

/* The input file a library failure concerns (falcon_error_info), or -1: a
 * value of a tensor (it has a step) is its file's; the sizes T, B, H and n
 * are q's (its leading dims and last dim), m is v's (its last dim). */
static int blamed_input(const run_ctx *c, const falcon_error_info *e)
{
    for (int i = 0; i < NUM_INPUTS; i++)
        if (c->paths[i] && e->t >= 0 && !strcmp(e->input, input_names[i])) return i;
    static const char *const q_sizes[] = {"T", "B", "H", "n"};
    for (size_t i = 0; i < sizeof q_sizes / sizeof q_sizes[0]; i++)
        if (!strcmp(e->input, q_sizes[i])) return IN_Q;
    return !strcmp(e->input, "m") ? IN_V : -1;
}

/* The library's message about the inputs, with the file it concerns in
 * front: "'q.npy': q[t=1,i=2] = nan: ...". Its words stay as they are. */
static int input_error(const run_ctx *c)
{
    const falcon_error_info *e = falcon_last_error_info();
    const int blame = blamed_input(c, e);
    if (blame < 0) return cli_error("%s", e->message);
    return cli_error("'%s': %s", c->paths[blame], e->message);
}

/* A failure of falcon_run_from: the checks of its inputs (the statuses of
 * falcon_validate_from) are the inputs' errors; the run's own (backend,
 * memory, overflow) name the segment's steps when the run has several. */
static int run_error(const run_ctx *c, falcon_status s, int64_t t0, int64_t len)
{
    if (s == FALCON_E_ARGUMENT || s == FALCON_E_SHAPE || s == FALCON_E_RANGE || s == FALCON_E_NONFINITE)
        return input_error(c);
    if (len < c->d.T)
        return cli_error("steps [%lld, %lld): %s", (long long)t0, (long long)(t0 + len), falcon_last_error());
    return cli_error("%s", falcon_last_error());
}

static int same_shape(const falcon_state_view *a, const falcon_state_view *b)
{
    return a->heads == b->heads && a->n == b->n && a->m == b->m && a->window == b->window;
}

/* The carried state: from --checkpoint-in, or fresh. */
static int make_state(run_ctx *c)
{
    const dims *d = &c->d;
    const int64_t heads = d->B * d->H;
    if (!c->args.ckpt_in)
        return falcon_state_create(heads, d->n, d->m, c->cfg.window, &c->state)
                   ? cli_error("%s", falcon_last_error()) : 0;
    /* the manifest's shape first: a checkpoint of another shape is named as
     * such before anything of its size is allocated */
    falcon_state_view v = {0};
    if (falcon_checkpoint_shape(c->args.ckpt_in, &v.heads, &v.n, &v.m, &v.window))
        return cli_error("--checkpoint-in: %s", falcon_last_error());
    const falcon_state_view want = {.heads = heads, .n = d->n, .m = d->m, .window = c->cfg.window};
    if (!same_shape(&v, &want))
        return cli_error("--checkpoint-in '%s': the checkpoint has heads=%lld, n=%lld, m=%lld, window=%lld "
                         "but the run has heads=%lld (B*H), n=%lld, m=%lld, window=%lld", c->args.ckpt_in,
                         (long long)v.heads, (long long)v.n, (long long)v.m, (long long)v.window,
                         (long long)heads, (long long)d->n, (long long)d->m, (long long)c->cfg.window);
    if (falcon_checkpoint_load(c->args.ckpt_in, &c->state))
        return cli_error("--checkpoint-in: %s", falcon_last_error());
    /* float64 values: a run below fp64 must be able to hold them, and one
     * that does not fit is the checkpoint's fault, not the inputs' */
    if (falcon_state_check(c->state, c->cfg.precision))
        return cli_error("--checkpoint-in: checkpoint '%s': %s", c->args.ckpt_in, falcon_last_error());
    v = falcon_state_get_view(c->state);
    if (!same_shape(&v, &want)) /* changed since */
        return cli_error("--checkpoint-in '%s': the checkpoint changed while it was read", c->args.ckpt_in);
    return 0;
}

/* Where the library splits a call itself: the chunk form's block, the
 * masked-parallel block, 1 for the recurrent form (1 too for an invalid
 * window: validation names it). A run split at multiples of it equals one
 * call bit for bit. */
static int64_t split_block(const run_ctx *c)
{
    const dims *d = &c->d;
    const int64_t chunk = falcon_chunk_of(c->cfg.chunk, d->n, d->m, c->cfg.window);
    const int64_t block = c->cfg.form == FALCON_FORM_CHUNK      ? falcon_chunk_block(chunk, c->cfg.window)
                        : c->cfg.form == FALCON_FORM_PARALLEL ? falcon_parallel_block(c->cfg.window)
                                                              : 1;
    return block < 1 ? 1 : block;
}

/* Steps per segment: --segment, else what fits SEGMENT_BYTES, rounded down
 * to a multiple of the form's block (the chunk, or the masked-parallel
 * block) so that the split falls where the library splits anyway. */
static int64_t segment_length(const run_ctx *c)
{
    const dims *d = &c->d;
    if (d->T == 0) return 0;
    if (c->args.segment > 0) return c->args.segment < d->T ? c->args.segment : d->T;
    int64_t per_step = 2 * d->m; /* v and the reads */
    for (int i = 0; i < NUM_INPUTS; i++)
        if (c->paths[i] && i != IN_V) per_step += width(c, i);
    const double bytes = (double)per_step * (double)(d->B * d->H) * (double)elem_size(c);
    int64_t seg = bytes >= (double)SEGMENT_BYTES ? 1 : (int64_t)((double)SEGMENT_BYTES / bytes);
    /* A multiple of the library's block: the segments split the run where
     * one call would, so segmented and whole runs agree bit for bit. */
    const int64_t block = split_block(c);
    if (seg > block) seg -= seg % block;
    return seg < d->T ? seg : d->T;
}

static int alloc_buffers(run_ctx *c)
{
    const int64_t rows = c->seg * c->d.B * c->d.H;
    for (int i = 0; i < NUM_INPUTS; i++)
        if (c->paths[i] && !(c->buf[i] = malloc((size_t)(rows * width(c, i)) * elem_size(c) + 1)))
            return cli_error("out of memory for a segment of %s: %lld steps x %lld heads", input_names[i],
                             (long long)c->seg, (long long)(c->d.B * c->d.H));
    if (!(c->out = malloc((size_t)(rows * c->d.m) * elem_size(c) + 1)))
        return cli_error("out of memory for a segment of the output: %lld steps x %lld heads",
                         (long long)c->seg, (long long)(c->d.B * c->d.H));
    const int64_t widest = c->d.n > c->d.m ? c->d.n : c->d.m;
    if (c->d.head_first && !(c->scratch = malloc((size_t)(c->seg * widest) * sizeof(double) + 1)))
        return cli_error("out of memory for a segment of one head: %lld steps", (long long)c->seg);
    return 0;
}

/* Elements of steps [t0, t0 + len) of a [B,T,H,w] (or [T,w]) tensor: one
 * contiguous block per b, at this offset. */
static int64_t block_first(const dims *d, int64_t b, int64_t t0, int64_t w)
{
    return ((b * d->T + t0) * d->H) * w;
}

/* Steps [t0, t0 + len) of batch b of input i, as [len][H][w] in dtype, into
 * dst: one range in the library's layout, one range per head head-first
 * (through the scratch buffer, each step's row put in its place). */
static falcon_status read_rows(run_ctx *c, int i, int64_t b, int64_t t0, int64_t len, falcon_dtype dtype, void *dst)
{
    const dims *d = &c->d;
    const int64_t w = width(c, i);
    if (!d->head_first) return falcon_npy_read_range(c->rd[i], block_first(d, b, t0, w), len * d->H * w, dtype, dst);
    const size_t esz = dtype == FALCON_DTYPE_F64 ? 8 : 4, row = (size_t)w * esz;
    for (int64_t h = 0; h < d->H; h++) {
        const falcon_status s = falcon_npy_read_range(c->rd[i], ((b * d->H + h) * d->T + t0) * w, len * w, dtype,
                                                      c->scratch);
        if (s) return s;
        for (int64_t t = 0; t < len; t++)
            memcpy((char *)dst + (size_t)(t * d->H + h) * row, (const char *)c->scratch + (size_t)t * row, row);
    }
    return FALCON_OK;
}

/* A float64 decay that is positive in the file but underflows to 0 in
 * float32 is named as that (the library would see alpha = 0). */
static int check_alpha_underflow(run_ctx *c, int64_t t0, int64_t len)
{
    if (!c->paths[IN_ALPHA] || run_dtype(c) != FALCON_DTYPE_F32 || c->info[IN_ALPHA].dtype != FALCON_DTYPE_F64)
        return 0;
    const dims *d = &c->d;
    const int64_t count = len * d->H;
    const float *got = c->buf[IN_ALPHA];
    double *x = NULL;
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t j = 0; j < count; j++) {
            if (got[b * count + j] != 0) continue;
            if (!x && !(x = malloc(sizeof(double) * (size_t)count)))
                return cli_error("out of memory for a segment of alpha");
            if (read_rows(c, IN_ALPHA, b, t0, len, FALCON_DTYPE_F64, x)) {
                free(x);
                return cli_error("alpha: %s", falcon_last_error());
            }
            for (int64_t k = j; k < count; k++)
                if (x[k] != 0 && got[b * count + k] == 0) {
                    char at[96];
                    const int64_t t = t0 + k / d->H, h = k % d->H;
                    if (d->batched) snprintf(at, sizeof at, "b=%lld,t=%lld,h=%lld", (long long)b, (long long)t, (long long)h);
                    else snprintf(at, sizeof at, "t=%lld", (long long)t);
                    const int r = cli_error("'%s': alpha[%s] = %g underflows to 0 in float32, the run's precision: "
                                            "decay must be in (0, 1]", c->paths[IN_ALPHA], at, x[k]);
                    free(x);
                    return r;
                }
            break; /* the zeros of this block are zeros in the file: the library names them */
        }
    free(x);
    return 0;
}

static int read_segment(run_ctx *c, int64_t t0, int64_t len)
{
    const dims *d = &c->d;
    for (int i = 0; i < NUM_INPUTS; i++) {
        if (!c->paths[i]) continue;
        const int64_t w = width(c, i), count = len * d->H * w;
        for (int64_t b = 0; b < d->B; b++) {
            char *dst = (char *)c->buf[i] + (size_t)(b * count) * elem_size(c);
            if (read_rows(c, i, b, t0, len, run_dtype(c), dst))
                return cli_error("%s: %s", input_names[i], falcon_last_error());
        }
    }
    return 0;
}

/* Batch b's reads [len][H][m] at their place in the file: one range, or
 * head-first one range per head gathered in the scratch buffer. */
static falcon_status write_rows(run_ctx *c, int64_t b, int64_t t0, int64_t len, const char *src)
{
    const dims *d = &c->d;
    if (!d->head_first) return falcon_npy_write_range(c->writer, block_first(d, b, t0, d->m), len * d->H * d->m, src);
    const size_t row = (size_t)d->m * elem_size(c);
    for (int64_t h = 0; h < d->H; h++) {
        for (int64_t t = 0; t < len; t++)
            memcpy((char *)c->scratch + (size_t)t * row, src + (size_t)(t * d->H + h) * row, row);
        const falcon_status s = falcon_npy_write_range(c->writer, ((b * d->H + h) * d->T + t0) * d->m, len * d->m,
                                                       c->scratch);
        if (s) return s;
    }
    return FALCON_OK;
}

/* fla's reads: scale * phi(q)^T h = scale * S phi(q), rounded once. */
static void scale_reads(run_ctx *c, int64_t count)
{
    if (c->scale == 1) return;
    if (run_dtype(c) == FALCON_DTYPE_F64)
        for (int64_t i = 0; i < count; i++) ((double *)c->out)[i] *= c->scale;
    else
        for (int64_t i = 0; i < count; i++) ((float *)c->out)[i] = (float)((double)((float *)c->out)[i] * c->scale);
}

static int write_segment(run_ctx *c, int64_t t0, int64_t len)
{
    const dims *d = &c->d;
    const int64_t count = len * d->H * d->m;
    scale_reads(c, count * d->B);
    for (int64_t b = 0; b < d->B; b++) {
        const char *src = (const char *)c->out + (size_t)(b * count) * elem_size(c);
        if (write_rows(c, b, t0, len, src)) return cli_error("--out: %s", falcon_last_error());
    }
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Progress on stderr after each segment, once the run has taken a second:
 * on a terminal one line rewritten in place (cleared at the end), with
 * --progress elsewhere a line at most every second. Otherwise nothing. */
static struct {
    int on, tty;
    double start, last;
} progress;

static void progress_begin(const run_ctx *c)
{
    progress.tty = isatty(STDERR_FILENO);
    progress.on = c->args.progress || progress.tty;
    progress.start = now();
    progress.last = 0;
}

static void progress_step(const run_ctx *c, int64_t done)
{
    if (!progress.on || done >= c->d.T) return;
    const double t = now(), elapsed = t - progress.start;
    if (elapsed < 1 || (!progress.tty && t - progress.last < 1)) return;
    progress.last = t;
    const double frac = c->d.T > 0 ? (double)done / (double)c->d.T : 1;
    fprintf(stderr, "%sfalcon run: %5.1f%% (%lld of %lld steps), %.0f s, about %.0f s left%s",
            progress.tty ? "\r\033[K" : "", 100 * frac, (long long)done, (long long)c->d.T, elapsed,
            frac > 0 ? elapsed * (1 - frac) / frac : 0, progress.tty ? "" : "\n");
    fflush(stderr);
    if (progress.tty) cli_progress_line(1);
}

static void progress_end(void)
{
    if (progress.on && progress.tty && progress.last > 0) {
        fputs("\r\033[K", stderr);
        cli_progress_line(0);
    }
    progress.on = 0;
}

/* One segment: read, run (validated once, steps named from the start),
 * write. */
static int run_segment(run_ctx *c, int64_t t0, int64_t len)
{
    if (read_segment(c, t0, len) || check_alpha_underflow(c, t0, len)) return CLI_FAIL;
    const falcon_inputs in = make_inputs(c, len);
    const double start = now();
    const falcon_status s = falcon_run_from(&c->cfg, &in, c->state, c->out, t0);
    if (s) return run_error(c, s, t0, len);
    c->seconds += now() - start;
    return write_segment(c, t0, len);
}

/* The reads: [T,m] or [B,T,H,m]. */
static falcon_array out_array(const run_ctx *c)
{
    falcon_array a = {run_dtype(c), c->d.nlead + 1, {0}, 0, NULL};
    memcpy(a.shape, c->d.lead, sizeof(int64_t) * (size_t)c->d.nlead);
    a.shape[c->d.nlead] = c->d.m;
    a.count = c->d.B * c->d.T * c->d.H * c->d.m;
    return a;
}

static int compute(run_ctx *c)
{
    /* Configuration and sizes first (no values yet), so that the library
     * names the bad size rather than the state it would not fit. */
    const falcon_inputs all = make_inputs(c, 0);
    if (falcon_validate(&c->cfg, &all, NULL)) return input_error(c);
    /* Heads run in parallel, one thread each: more threads than heads only
     * cost (each reserves a stack). Results do not depend on the count. */
    const int64_t heads = c->d.B * c->d.H;
    if (heads < (c->cfg.threads > 0 ? c->cfg.threads : omp_get_max_threads())) c->cfg.threads = (int)heads;
    if (make_state(c)) return CLI_FAIL;
    if (c->args.layout == CLI_LAYOUT_FLA) c->scale = c->args.scale > 0 ? c->args.scale : 1 / sqrt((double)c->d.n);
    c->seg = segment_length(c);
    if (alloc_buffers(c)) return CLI_FAIL;
    const falcon_array out = out_array(c);
    if (falcon_npy_create_output(c->tx, c->slot_out, &out, &c->writer))
        return cli_error("--out: %s", falcon_last_error());
    /* T = 0 still runs once: the library checks the backend and the state. */
    int64_t t0 = 0, want = c->seg;
    progress_begin(c);
    /* With --progress, segments start at the library's block and double
     * while one takes under a quarter second (up to the buffers' length),
     * so that a long segment cannot hide the progress for more than about
     * a second. Split at the block, the CPU backends' results are those of
     * one call bit for bit; the mpfr backend's equal them to rounding (its
     * state is carried in double between calls). Only when asked: a
     * terminal alone does not change how the run is split, nor does
     * --progress change segments that --segment chose. */
    const int64_t block = split_block(c);
    c->adaptive = c->args.progress && !c->args.segment && block < c->seg;
    if (c->adaptive) /* 16 steps or more, a multiple of the block */
        for (want = block; want < 16 && 2 * want <= c->seg;) want *= 2;
    do {
        const int64_t len = c->d.T - t0 < want ? c->d.T - t0 : want;
        const double start = now();
        if (run_segment(c, t0, len)) return CLI_FAIL;
        t0 += len;
        c->segments++;
        progress_step(c, t0);
        if (c->adaptive && now() - start < 0.25) want = want <= c->seg / 2 ? 2 * want : want;
    } while (t0 < c->d.T);
    progress_end();
    return 0;
}

/* The memory: [m,n] or [B,H,m,n], in the run's precision (an fp32 run's
 * state holds fp32 values, so nothing is lost). *buf is freed by the caller. */
static falcon_array state_array(const run_ctx *c, void **buf)
{
    const falcon_state_view v = falcon_state_get_view(c->state);
    const dims *d = &c->d;
    falcon_array a = {run_dtype(c), d->batched ? 4 : 2, {0}, v.heads * v.m * v.n, NULL};
    /* fla: each head's [n][m], the transpose of the library's [m][n] */
    const int fla = c->args.layout == CLI_LAYOUT_FLA;
    const int64_t rows = fla ? d->n : d->m, cols = fla ? d->m : d->n;
    const int64_t batched[4] = {d->B, d->H, rows, cols}, single[2] = {rows, cols};
    memcpy(a.shape, d->batched ? batched : single, sizeof(int64_t) * (size_t)a.ndim);
    *buf = malloc((size_t)a.count * elem_size(c) + 1);
    for (int64_t i = 0; *buf && i < a.count; i++) {
        const int64_t head = i / (rows * cols), r = i / cols % rows, k = i % cols;
        const double x = v.S[fla ? head * rows * cols + k * rows + r : i];
        if (a.dtype == FALCON_DTYPE_F64) ((double *)*buf)[i] = x;
        else ((float *)*buf)[i] = (float)x;
    }
    a.data = *buf;
    return a;
}

/* Declare every output before anything is computed: each path is checked
 * (not a directory, device or symlink to one, not an input, not another
 * output) and gets its temporary now, so that an output that cannot be
 * written fails the run before it starts and no output replaces another. */
static int prepare_outputs(run_ctx *c)
{
    static const char *const opts[NUM_INPUTS] = {"--q", "--k", "--v", "--beta", "--alpha", "--gain"};
    c->slot_state = c->slot_ckpt = -1;
    if (falcon_outputs_begin(&c->tx)) return cli_error("%s", falcon_last_error());
    for (int i = 0; i < NUM_INPUTS; i++)
        if (c->paths[i] && falcon_outputs_input(c->tx, opts[i], c->paths[i])) return cli_error("%s", falcon_last_error());
    if (c->args.ckpt_in && falcon_outputs_input_dir(c->tx, "--checkpoint-in", c->args.ckpt_in))
        return cli_error("%s", falcon_last_error());
    if (falcon_outputs_file(c->tx, "--out", c->args.out, &c->slot_out))
        return cli_error("--out: %s", falcon_last_error());
    if (c->args.state_out && falcon_outputs_file(c->tx, "--state-out", c->args.state_out, &c->slot_state))
        return cli_error("--state-out: %s", falcon_last_error());
    if (c->args.ckpt_out && falcon_outputs_checkpoint(c->tx, "--checkpoint-out", c->args.ckpt_out, &c->slot_ckpt))
        return cli_error("--checkpoint-out: %s", falcon_last_error());
    return 0;
}

/* Finish every output in its temporary, then commit them together: either
 * all of them replace their targets or none does. */
static int write_outputs(run_ctx *c)
{
    falcon_npy_writer *w = c->writer;
    c->writer = NULL; /* commit frees it, whatever happens */
    if (falcon_npy_commit(w)) return cli_error("--out: %s", falcon_last_error());
    if (c->args.state_out) {
        void *buf;
        const falcon_array a = state_array(c, &buf);
        if (!buf) return cli_error("--state-out: out of memory");
        falcon_status s = falcon_npy_create_output(c->tx, c->slot_state, &a, &w);
        if (!s && (s = falcon_npy_write_range(w, 0, a.count, a.data))) falcon_npy_abort(w);
        if (!s) s = falcon_npy_commit(w);
        free(buf);
        if (s) return cli_error("--state-out: %s", falcon_last_error());
    }
    if (c->args.ckpt_out && falcon_checkpoint_save_to(c->tx, c->slot_ckpt, c->state))
        return cli_error("--checkpoint-out: %s", falcon_last_error());
    falcon_outputs *tx = c->tx;
    c->tx = NULL;
    if (falcon_outputs_commit(tx)) return cli_error("%s", falcon_last_error());
    return 0;
}

static void print_verbose(const run_ctx *c)
{
    struct rusage ru;
    const long rss_kib = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
    const dims *d = &c->d;
    const int64_t segments = c->segments;
    printf("backend %s, precision %s, B %lld, T %lld, H %lld, n %lld, m %lld, %.6f s, "
           "%lld segment%s of %s%lld steps, max RSS %.1f MiB\n",
           falcon_backend_name(falcon_backend_resolve(c->cfg.backend)), falcon_precision_name(c->cfg.precision),
           (long long)d->B, (long long)d->T, (long long)d->H, (long long)d->n, (long long)d->m, c->seconds,
           (long long)segments, segments == 1 ? "" : "s", c->adaptive ? "up to " : "", (long long)c->seg, (double)rss_kib / 1024.0);
}

static void free_ctx(run_ctx *c)
{
    falcon_npy_abort(c->writer);
    falcon_outputs_abort(c->tx);
    for (int i = 0; i < NUM_INPUTS; i++) {
        falcon_npy_close(c->rd[i]);
        free(c->buf[i]);
    }
    falcon_state_free(c->state);
    free(c->out);
    free(c->scratch);
}

int cli_run(int argc, char **argv)
{
    run_ctx c;
    memset(&c, 0, sizeof c);
    if (cli_parse_run(argc, argv, &c.args)) return CLI_FAIL;
    if (c.args.help) {
        cli_print_run_help(stdout);
        return 0;
    }
    c.cfg = cli_config(&c.args);
    const char *paths[NUM_INPUTS] = {c.args.q, c.args.k, c.args.v, c.args.beta, c.args.alpha, c.args.gain};
    memcpy(c.paths, paths, sizeof paths);
    c.scale = 1;
    falcon_outputs_clean_on_signals();
    const int status =
        open_inputs(&c) || check_shapes(&c) || prepare_outputs(&c) || compute(&c) || write_outputs(&c) ? CLI_FAIL : 0;
    if (!status && c.args.verbose) print_verbose(&c);
    free_ctx(&c);
    return status;
}
