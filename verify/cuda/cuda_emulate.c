/*
 * The CUDA backend's kernels run on the CPU: the same code (fc_core.h,
 * fc_backward.h)
 * compiled by the C compiler, one block after the other, each phase's
 * threads one after the other (first to last, or last to first with
 * fc_emu_reverse: a result that depends on the order reveals a race between
 * threads of one phase). Work buffers and features start as NaN so that a
 * read of anything not written shows up in the results. For tests only: not
 * part of the library.
 */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "cuda_emulate.h"

int64_t fc_emu_smem_bytes = 227 * 1024;
int fc_emu_threads = 0;
int fc_emu_reverse = 0;
fc_layout fc_emu_last_layout;
int fc_emu_last_threads;

static void poison(float *p, int64_t count)
{
    for (int64_t i = 0; i < count; i++) p[i] = NAN;
}

/* The features of pb (poisoned) and `extra` more floats, in one new
 * buffer (returned; NULL: out of memory, msg set); pb's feature pointers
 * set, *extra_at the rest. */
static float *features(fc_problem *pb, int64_t extra, float **extra_at, char *msg, size_t len)
{
    const int64_t heads = pb->heads, n = pb->n, T = pb->T, E = pb->Emax;
    const int64_t nX = heads * E * n, nZ = pb->has_gain ? heads * E * n : 0, nxz = 3 * heads * E;
    const int64_t nQ = heads * T * n, neta = 2 * heads * T;
    const int64_t total = nX + nZ + nxz + nQ + neta + extra + 1;
    float *buf = malloc(sizeof(float) * (size_t)total);
    if (!buf) {
        snprintf(msg, len, "emulation: out of memory");
        return NULL;
    }
    poison(buf, total);
    pb->X = buf;
    pb->Z = pb->has_gain ? pb->X + nX : NULL;
    pb->xz = pb->X + nX + nZ;
    pb->Qf = pb->xz + nxz;
    pb->eta = pb->Qf + nQ;
    *extra_at = pb->eta + neta;
    pb->head0 = 0;
    pb->emu_reverse = fc_emu_reverse;
    for (int64_t hd = 0; hd < heads; hd++)
        for (int64_t e = 0; e < E; e++) fc_prep_example(pb, hd, e);
    for (int64_t hd = 0; hd < heads; hd++)
        for (int64_t t = 0; t < T; t++) fc_prep_step(pb, hd, t);
    return buf;
}

int fc_emu_exec(fc_problem *pb, float *out, float *S_out, char *msg, size_t len)
{
    int r = fc_plan(pb, fc_emu_smem_bytes, fc_emu_threads, msg, len);
    if (r) return r;
    fc_emu_last_layout = pb->lay;
    fc_emu_last_threads = pb->nth;
    const int64_t nscr = pb->heads * pb->lay.glob_floats, nsm = pb->lay.smem_floats;
    pb->out = out;
    pb->S = S_out;
    float *buf = features(pb, nscr + nsm, &pb->scratch, msg, len);
    if (!buf) return FC_ERR_NOMEM;
    float *smem = pb->scratch + nscr;
    for (int64_t hd = 0; hd < pb->heads; hd++) {
        poison(smem, nsm);
        if (pb->form == FC_FORM_RECURRENT)
            fc_recurrent_head(pb, hd, hd, smem, pb->nth);
        else
            fc_blocked_head(pb, hd, hd, smem, pb->nth);
    }
    free(buf);
    return FC_OK;
}

int fc_emu_bw_exec(fc_grad_problem *gp, char *msg, size_t len)
{
    int r = fc_bw_plan(gp, fc_emu_threads, msg, len);
    if (r) return r;
    fc_emu_last_threads = gp->f.nth;
    float *buf = features(&gp->f, gp->f.heads * gp->ws, &gp->f.scratch, msg, len);
    if (!buf) return FC_ERR_NOMEM;
    for (int64_t hd = 0; hd < gp->f.heads; hd++) fc_bw_head(gp, hd, hd, gp->f.nth);
    free(buf);
    return FC_OK;
}
