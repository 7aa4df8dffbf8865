/* falcon_backward's CPU path for one precision (compiled once per
 * precision by src/backward-cpu.c): one falcon_grad_head per (b, h), heads
 * in parallel. Each head is independent and runs the same code whatever
 * the thread count, so the gradients are bitwise the same for any. */

#include "head_of.inc.c"

/* Head hh = b * H + h: the forward's views (head_of.inc.c: no output, the
 * state read from S_in) and its cotangents and gradients. */
static RS(falcon_grad_head) RS(grad_head_of)(const falcon_config *cfg, const falcon_inputs *in,
                                             const falcon_state *st, const void *dO, const double *dS_T,
                                             const falcon_grads *gr, const RS(falcon_uk) *uk, int64_t hh)
{
    const int64_t T = in->T, H = in->H, n = in->n, m = in->m, keep = st->keep;
    const int64_t base = hh / H * T * H + hh % H;
    RS(falcon_grad_head) g = {
        /* the forward's views; the state is read (S_in), never written */
        .f = RS(head_of)(cfg, in, (falcon_state *)st, st->S, NULL, uk, 0, hh),
        .dO = dO ? (const REAL *)dO + base * m : NULL,
        .dS_T = dS_T ? dS_T + hh * m * n : NULL,
        .dq = (REAL *)gr->dq + base * n,
        .dk = (REAL *)gr->dk + base * n,
        .dgain = gr->dgain ? (REAL *)gr->dgain + base * n : NULL,
        .dv = (REAL *)gr->dv + base * m,
        .dbeta = (REAL *)gr->dbeta + base,
        .dalpha = gr->dalpha ? (REAL *)gr->dalpha + base : NULL,
        .dS0 = gr->dS0 ? gr->dS0 + hh * m * n : NULL,
        .dprev_key = gr->dprev_key ? gr->dprev_key + hh * n : NULL,
        .dhist_k = gr->dhist_k ? gr->dhist_k + hh * keep * n : NULL,
        .dhist_v = gr->dhist_v ? gr->dhist_v + hh * keep * m : NULL,
        .checkpoint = falcon_backward_checkpoint(),
    };
    return g;
}

/* Every head through the drivers' backward for the form: the recurrent
 * sweep, or the blocked forms' adjoint with blocks of L steps. The caller
 * has checked that the driver exists. */
falcon_status RS(falcon_backward_cpu)(const falcon_config *cfg, const falcon_inputs *in, const falcon_state *st,
                                      const void *dO, const double *dS_T, const falcon_grads *gr,
                                      const RS(falcon_cpu) *cpu)
{
    const RS(falcon_drivers) *fw = cpu->fw;
    const int64_t heads = in->B * in->H;
    const int threads = falcon_threads(cfg);
    const int team = (int64_t)threads < heads ? threads : (int)heads;
    const int64_t L = cfg->form == FALCON_FORM_CHUNK ? falcon_chunk_block(cfg->chunk, cfg->window)
                                                    : falcon_parallel_backward_block(in->n, in->m, cfg->window);
    falcon_status result = FALCON_OK;
    int64_t failed = INT64_MAX; /* the first head (in order) that failed */
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
    for (int64_t hh = 0; hh < heads; hh++) {
        falcon_clean_upper();
        const RS(falcon_grad_head) g = RS(grad_head_of)(cfg, in, st, dO, dS_T, gr, cpu->uk, hh);
        const falcon_status s = cfg->form == FALCON_FORM_RECURRENT ? fw->backward_recurrent(&g)
                                                                   : fw->backward_blocked(&g, L);
        if (s != FALCON_OK) {
#pragma omp critical(falcon_backward_status)
            if (hh < failed) failed = hh, result = s;
        }
    }
    return result;
}
