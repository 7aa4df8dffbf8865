/* The CPU framework for one precision: one falcon_head per (b, h), heads in
 * parallel. Each head is independent and runs the same code whatever the
 * thread count, so results are bitwise reproducible across thread counts. */
static falcon_status RS(run_cpu)(const falcon_config *cfg, const falcon_inputs *in,
                                 falcon_state *st, void *out, const RS(falcon_uk) *uk)
{
    const int64_t B = in->B, T = in->T, H = in->H, n = in->n, m = in->m, heads = B * H;
    const int64_t keep = st->keep;
    falcon_status result = FALCON_OK;
    const int64_t L = cfg->form == FALCON_FORM_CHUNK ? cfg->chunk : falcon_parallel_block(cfg->window);
#pragma omp parallel for schedule(dynamic, 1) num_threads(cfg->threads > 0 ? cfg->threads : omp_get_max_threads())
    for (int64_t hh = 0; hh < heads; hh++) {
        const int64_t b = hh / H, h = hh % H;
        const int64_t base = (b * T * H + h);
        RS(falcon_head) hd = {
            .T = T, .n = n, .m = m,
            .q = (const REAL *)in->q + base * n,
            .k = (const REAL *)in->k + base * n,
            .gain = in->gain ? (const REAL *)in->gain + base * n : NULL,
            .ldk = H * n,
            .v = (const REAL *)in->v + base * m,
            .ldv = H * m,
            .beta = (const REAL *)in->beta + base,
            .alpha = in->alpha ? (const REAL *)in->alpha + base : NULL,
            .lds = H,
            .out = (REAL *)out + base * m,
            .ldo = H * m,
            .regression = falcon_variant_is_regression(cfg->variant),
            .prefix = cfg->align == FALCON_ALIGN_PREFIX,
            .phi = (int)cfg->phi,
            .eps = (REAL)cfg->eps,
            .window = cfg->window,
            .S = st->S + hh * m * n,
            .prev_key = st->has_prev[hh] ? st->prev_key + hh * n : NULL,
            .hist_k = st->hist_k + hh * keep * n,
            .hist_v = st->hist_v + hh * keep * m,
            .hist_len = st->hist_len[hh],
            .uk = uk,
        };
        falcon_status s = cfg->form == FALCON_FORM_RECURRENT ? RS(falcon_recurrent)(&hd)
                                                             : RS(falcon_blocked)(&hd, L);
        if (s != FALCON_OK) {
#pragma omp critical(falcon_run_status)
            result = s;
        }
    }
    return result;
}
