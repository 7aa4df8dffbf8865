/* One head's views for the CPU drivers, for one precision (REAL, RS):
 * included by run_cpu.inc.c (the forward) and backward_cpu.inc.c (the
 * backward pass's forward problem). */
/* Head hh = b * H + h: views into the [B][T][H][D] tensors and its state. */
static RS(falcon_head) RS(head_of)(const falcon_config *cfg, const falcon_inputs *in,
                                   falcon_state *st, const double *S_in, void *out, const RS(falcon_uk) *uk,
                                   int direct_decay, int64_t hh)
{
    const int64_t T = in->T, H = in->H, n = in->n, m = in->m, keep = st->keep;
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
        .out = out ? (REAL *)out + base * m : NULL,
        .ldo = H * m,
        .regression = falcon_variant_is_regression(cfg->variant),
        .prefix = cfg->align == FALCON_ALIGN_PREFIX,
        .phi = (int)cfg->phi,
        .eps = (REAL)cfg->eps,
        .window = cfg->window,
        .operand_drop = falcon_operand_format(cfg->precision),
        .S = st->S + hh * m * n,
        .S_in = S_in ? S_in + hh * m * n : NULL,
        .scale = st->scale + hh,
        .prev_key = st->has_prev[hh] ? st->prev_key + hh * n : NULL,
        .hist_k = st->hist_k + hh * keep * n,
        .hist_v = st->hist_v + hh * keep * m,
        .hist_len = st->hist_len[hh],
        .uk = uk,
        .tile_bytes = falcon_tile_bytes(),
        .direct_decay = direct_decay,
        .work = &falcon_work_library,
    };
    return hd;
}
