/*
 * The tf32/bf16 chunk backward against an independent model of one block
 * (docs/math.md section 12, "Operand formats in the backward pass"),
 * written out plainly here for Falcon-1 and Falcon-1A (same-step
 * alignment, a window of one, no decay or gains, identity feature map, a
 * carried memory, one block of T steps): every operand of every matrix
 * product rounded to the format (the recomputed forward's keys, queries, the
 * memory's copy, R after the solve, W, Rg; the adjoints' dO, G_L, lambda,
 * Wg, Cg, Ln and the dS0 update's coefficients), each product accumulated in
 * fp32 in index order; the normaliser, residuals, both solves and every
 * elementwise step in fp32. The rounding here is on values (the nearer
 * neighbour on the format's grid from the binade, ties to even by
 * nearbyint), not the kernels' bit trick, and the inputs are full fp32
 * values, so every rounding is seen.
 *
 * An operand left unrounded is a bug no accuracy gate can catch: the
 * gradients come out closer to the exact ones. Against this model it moves
 * a tensor by about u_op / u = 2^13 (tf32) or 2^16 (bf16) units of fp32's
 * roundoff; the backends' other summation orders move it by a few units
 * (MODEL_TOL, measured below it).
 */
#include <criterion/criterion.h>
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "gate.h"

enum { T = 8, N = 4, M = 3 };
/* Normwise relative difference from the model, in units of 2^-24. Measured
 * on AMD Zen 3 (scalar, avx2, avx512-simde; fp32, tf32, bf16): at most
 * 12 units, from the backends' summation orders; one operand left
 * unrounded moves a tensor by thousands (gate/THRESHOLDS.md, "Gradients:
 * tf32 and bf16"). */
#define MODEL_TOL 64.0

/* x rounded to nearest (ties to even) on the grid of a format keeping
 * 23 - drop fraction bits (normal fp32 values). */
static float rnd(float x, int drop)
{
    if (x == 0 || drop == 0) return x;
    int e;
    frexp((double)x, &e);
    const int q = e - 1 - (23 - drop);
    return (float)ldexp(nearbyint(ldexp((double)x, -q)), q);
}

static float dot(const float *a, const float *b, int len)
{
    float s = 0;
    for (int i = 0; i < len; i++) s += a[i] * b[i];
    return s;
}

typedef struct gm_in {
    int reg, drop;
    float q[T][N], k[T][N], v[T][M], beta[T], eps, S0[M][N], dO[T][M], dS[M][N];
} gm_in;

typedef struct gm_out {
    float dq[T][N], dk[T][N], dv[T][M], dbeta[T], dS0[M][N];
} gm_out;

/* The block's forward quantities, as the kernel recomputes them. */
typedef struct gm_fwd {
    float x[T][N], qr[T][N], S0r[M][N], eta[T], Nj[T], E[T][M], R[T][M], A[T][T], W[T][T];
} gm_fwd;

static void model_forward(const gm_in *in, gm_fwd *f)
{
    const int d = in->drop;
    memset(f, 0, sizeof *f);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < N; i++) f->x[t][i] = rnd(in->k[t][i], d), f->qr[t][i] = rnd(in->q[t][i], d);
    for (int c = 0; c < M; c++)
        for (int i = 0; i < N; i++) f->S0r[c][i] = rnd(in->S0[c][i], d);
    for (int p = 0; p < T; p++) {
        f->Nj[p] = in->eps + dot(f->x[p], f->x[p], N);
        f->eta[p] = in->beta[p] / f->Nj[p];
        for (int c = 0; c < M; c++) {
            f->E[p][c] = in->v[p][c] - (in->reg ? dot(f->S0r[c], f->x[p], N) : 0);
            f->R[p][c] = f->eta[p] * (in->reg ? f->E[p][c] : in->v[p][c]);
        }
        for (int q = 0; in->reg && q < p; q++) {
            f->A[p][q] = f->eta[p] * dot(f->x[p], f->x[q], N);
            for (int c = 0; c < M; c++) f->R[p][c] -= f->A[p][q] * f->R[q][c];
        }
    }
    for (int p = 0; p < T; p++)
        for (int c = 0; c < M; c++) f->R[p][c] = rnd(f->R[p][c], d);
    for (int i = 0; i < T; i++)
        for (int p = 0; p <= i; p++) f->W[i][p] = rnd(dot(f->qr[i], f->x[p], N), d);
}

/* lambda = (I + A)^{-T} dR (regression; dR itself otherwise), in fp32. */
static void model_lambda(const gm_in *in, const gm_fwd *f, float dR[T][M], float lam[T][M])
{
    for (int p = T - 1; p >= 0; p--)
        for (int c = 0; c < M; c++) {
            float s = dR[p][c];
            for (int q = p + 1; in->reg && q < T; q++) s -= f->A[q][p] * lam[q][c];
            lam[p][c] = s;
        }
}

static void model_backward(const gm_in *in, gm_out *o)
{
    const int d = in->drop;
    static gm_fwd f;
    model_forward(in, &f);
    float dOr[T][M], Gr[M][N], dR[T][M], lam[T][M], lamr[T][M], Wg[T][T] = {{0}}, Cg[T][T] = {{0}}, Ln[T][M];
    for (int t = 0; t < T; t++)
        for (int c = 0; c < M; c++) dOr[t][c] = rnd(in->dO[t][c], d);
    for (int c = 0; c < M; c++)
        for (int i = 0; i < N; i++) Gr[c][i] = rnd(in->dS[c][i], d);
    for (int p = 0; p < T; p++)
        for (int c = 0; c < M; c++) {
            float s = 0;
            for (int i = 0; i < T; i++) s += f.W[i][p] * dOr[i][c];
            dR[p][c] = s + dot(f.x[p], Gr[c], N); /* the end state's z_p . G_L (Rg = R: no decay) */
        }
    model_lambda(in, &f, dR, lam);
    for (int p = 0; p < T; p++)
        for (int c = 0; c < M; c++) lamr[p][c] = rnd(lam[p][c], d);
    for (int i = 0; i < T; i++)
        for (int p = 0; p <= i; p++) Wg[i][p] = rnd(dot(dOr[i], f.R[p], M), d);
    for (int p = 0; p < T; p++) {
        float deta = in->reg ? dot(lam[p], f.E[p], M) : dot(lam[p], in->v[p], M);
        for (int q = 0; in->reg && q < p; q++) {
            const float dA = -dot(lamr[p], f.R[q], M);
            deta += dA * dot(f.x[p], f.x[q], N);
            Cg[p][q] = dA * f.eta[p];
        }
        for (int c = 0; c < M; c++) o->dv[p][c] = f.eta[p] * lam[p][c], Ln[p][c] = in->reg ? -f.eta[p] * lam[p][c] : 0;
        o->dbeta[p] = deta / f.Nj[p];
        Cg[p][p] = -deta * f.eta[p] / f.Nj[p];
    }
    for (int p = 0; p < T; p++) {
        for (int q = 0; q < T; q++) Cg[p][q] = rnd(Cg[p][q], d);
        for (int c = 0; c < M; c++) Ln[p][c] = rnd(Ln[p][c], d);
    }
    for (int i = 0; i < N; i++) {
        for (int t = 0; t < T; t++) {
            float a = 0, b = 0, dz = 0, cz = 0, dx = 0, lx = 0;
            for (int p = 0; p < T; p++) a += Wg[t][p] * f.x[p][i];
            for (int c = 0; c < M; c++) b += dOr[t][c] * f.S0r[c][i];
            o->dq[t][i] = a + b;
            for (int j = 0; j < T; j++) dz += Wg[j][t] * f.qr[j][i];
            for (int c = 0; c < M; c++) dz += f.R[t][c] * Gr[c][i];
            for (int p = 0; p < T; p++) cz += Cg[p][t] * f.x[p][i];
            for (int q = 0; q < T; q++) dx += Cg[t][q] * f.x[q][i];
            for (int c = 0; c < M; c++) lx += Ln[t][c] * f.S0r[c][i];
            o->dk[t][i] = (dx + lx) + (dz + cz);
        }
        for (int c = 0; c < M; c++) {
            float s = in->dS[c][i];
            for (int t = 0; t < T; t++) s += dOr[t][c] * f.qr[t][i];
            for (int t = 0; t < T; t++) s += Ln[t][c] * f.x[t][i];
            o->dS0[c][i] = s;
        }
    }
}

static double gm_uniform(uint64_t *s, double lo, double hi)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return lo + (hi - lo) * ((double)(*s >> 11) * 0x1.0p-53);
}

static void gm_inputs(gm_in *in, int reg, int drop, uint64_t seed)
{
    memset(in, 0, sizeof *in);
    in->reg = reg, in->drop = drop, in->eps = 1e-6f;
    uint64_t s = 0x9E3779B97F4A7C15ull ^ (seed * 1000003u);
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < N; i++) in->q[t][i] = (float)gm_uniform(&s, -1, 1), in->k[t][i] = (float)gm_uniform(&s, -1, 1);
        for (int c = 0; c < M; c++) in->v[t][c] = (float)gm_uniform(&s, -1, 1), in->dO[t][c] = (float)gm_uniform(&s, -1, 1);
        in->beta[t] = (float)(reg ? gm_uniform(&s, 0.1, 1.9) : gm_uniform(&s, 0, 1));
    }
    for (int c = 0; c < M; c++)
        for (int i = 0; i < N; i++) in->S0[c][i] = (float)gm_uniform(&s, -1, 1), in->dS[c][i] = (float)gm_uniform(&s, -1, 1);
}

/* The kernel's gradients of the same block on backend b. */
static void kernel_backward(const gm_in *in, falcon_backend b, falcon_precision prec, gm_out *o)
{
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.variant = in->reg ? FALCON_1 : FALCON_1A, cfg.align = FALCON_ALIGN_SAME, cfg.form = FALCON_FORM_CHUNK;
    cfg.chunk = T, cfg.precision = prec, cfg.backend = b, cfg.eps = in->eps, cfg.threads = 1;
    const falcon_inputs fin = falcon_inputs_sequence(T, N, M, in->q, in->k, in->v, in->beta, NULL, NULL);
    falcon_state *st;
    double S0[M * N], dS[M * N], dS0[M * N];
    for (int i = 0; i < M * N; i++) S0[i] = in->S0[i / N][i % N], dS[i] = in->dS[i / N][i % N];
    cr_assert_eq(falcon_state_create(1, N, M, 1, &st), FALCON_OK);
    cr_assert_eq(falcon_state_set_memory(st, S0), FALCON_OK);
    const falcon_grads g = {.dq = o->dq, .dk = o->dk, .dv = o->dv, .dbeta = o->dbeta, .dS0 = dS0};
    cr_assert_eq(falcon_backward(&cfg, &fin, st, in->dO, dS, &g), FALCON_OK, "%s", falcon_last_error());
    for (int i = 0; i < M * N; i++) o->dS0[i / N][i % N] = (float)dS0[i];
    falcon_state_free(st);
}

static double rel_diff(const float *x, const float *ref, int count)
{
    double num = 0, den = 0;
    for (int i = 0; i < count; i++) {
        num += ((double)x[i] - ref[i]) * ((double)x[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) / 0x1p-24 : sqrt(num) / 0x1p-24;
}

static void against_model(falcon_precision prec)
{
    const int drop = gate_operand_drop(prec);
    cr_assert(fegetround() == FE_TONEAREST);
    static const char *const names[] = {"dq", "dk", "dv", "dbeta", "dS0"};
    int ran = 0;
    for (int reg = 0; reg < 2; reg++)
        for (uint64_t seed = 1; seed <= 4; seed++) {
            gm_in in;
            gm_out mo, ko;
            gm_inputs(&in, reg, drop, seed);
            model_backward(&in, &mo);
            for (int b = 0; b < gate_backend_count; b++) {
                if (!gate_backend_runs(gate_backends[b], prec) || gate_backends[b] == FALCON_BACKEND_CUDA) continue;
                kernel_backward(&in, gate_backends[b], prec, &ko);
                const double e[5] = {rel_diff(&ko.dq[0][0], &mo.dq[0][0], T * N),
                                     rel_diff(&ko.dk[0][0], &mo.dk[0][0], T * N),
                                     rel_diff(&ko.dv[0][0], &mo.dv[0][0], T * M),
                                     rel_diff(ko.dbeta, mo.dbeta, T),
                                     rel_diff(&ko.dS0[0][0], &mo.dS0[0][0], M * N)};
                printf("grad operand model %s %s %s seed=%llu:", falcon_backend_name(gate_backends[b]),
                       falcon_precision_name(prec), reg ? "falcon1" : "falcon1a", (unsigned long long)seed);
                for (int t = 0; t < 5; t++) {
                    printf(" %s %.2f", names[t], e[t]);
                    cr_expect(e[t] <= MODEL_TOL, "%s %s %s seed %llu: %s %.3g units from the model",
                              falcon_backend_name(gate_backends[b]), falcon_precision_name(prec),
                              reg ? "falcon1" : "falcon1a", (unsigned long long)seed, names[t], e[t]);
                }
                printf(" units of 2^-24 (<= %.0f)\n", MODEL_TOL);
                ran++;
            }
        }
    cr_assert(ran > 0);
}

Test(grad_operand_model, fp32) { against_model(FALCON_FP32); }
Test(grad_operand_model, tf32) { against_model(FALCON_TF32); }
Test(grad_operand_model, bf16) { against_model(FALCON_BF16); }

/* tf32/bf16 in falcon_backward: the chunk form on the CPU kernel backends
 * only, refused elsewhere with falcon_run's rules (docs/math.md 12.4),
 * before any gradient is written. */
static void refused(falcon_precision prec, falcon_form form, falcon_backend backend, const char *rule)
{
    gm_in in;
    gm_out o;
    gm_inputs(&in, 1, gate_operand_drop(prec), 1);
    for (int i = 0; i < T * N; i++) o.dq[i / N][i % N] = 7;
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.variant = FALCON_1, cfg.form = form, cfg.backend = backend, cfg.precision = prec, cfg.threads = 1;
    const falcon_inputs fin = falcon_inputs_sequence(T, N, M, in.q, in.k, in.v, in.beta, NULL, NULL);
    const falcon_grads g = {.dq = o.dq, .dk = o.dk, .dv = o.dv, .dbeta = o.dbeta};
    const falcon_status s = falcon_backward(&cfg, &fin, NULL, in.dO, NULL, &g);
    cr_assert_eq(s, FALCON_E_ARGUMENT, "%s %s: %s", falcon_precision_name(prec), falcon_form_name(form),
                 falcon_last_error());
    cr_expect_str_eq(falcon_last_error_info()->rule, rule);
    cr_expect_str_eq(falcon_last_error_info()->input, "config.precision");
    for (int i = 0; i < T * N; i++) cr_expect_eq(o.dq[i / N][i % N], 7.0f, "dq written before the refusal");
}

Test(grad_operand_model, formats_refused_outside_the_chunk_form)
{
    for (int p = FALCON_TF32; p <= FALCON_BF16; p++) {
        refused((falcon_precision)p, FALCON_FORM_RECURRENT, FALCON_BACKEND_SCALAR, "format-form");
        refused((falcon_precision)p, FALCON_FORM_PARALLEL, FALCON_BACKEND_SCALAR, "format-form");
        refused((falcon_precision)p, FALCON_FORM_CHUNK, FALCON_BACKEND_MPFR, "format-backend");
        refused((falcon_precision)p, FALCON_FORM_CHUNK, FALCON_BACKEND_CUDA, "format-backend");
    }
}
