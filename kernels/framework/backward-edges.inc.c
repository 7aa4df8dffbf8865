/* The blocked backward's edges (backward-blocked.inc.c includes it after
 * bb_blk, once per precision and ISA): the two places where the forward
 * chunk kernel leaves its block algebra, tested as the forward tests them,
 * so that the driver can hand such a head to the recurrent backward (the
 * header's "The edges of the range"). */

/* 1 when the forward stores example l scaled (falcon_math.h, "key
 * scaling"; blk_rescale_keys): its x.z out of range, and x, Falcon-2's
 * gain row or z = g * x far from 1. A zero key, or an x.z near 0 by
 * cancellation (gains of both signs), keeps the scale 1 there, and the
 * block algebra here. */
static int RS(bb_scaled)(const bb_blk *b, int64_t l)
{
    const bb_work *w = b->w;
    const RS(falcon_head) *h = b->h;
    if (RS(falcon_xz_in_range)(w->Kz[l * w->ldg + l])) return 0;
    if (RS(falcon_pow2_scale)(w->X + l * w->ldn, b->n) != 1) return 1;
    if (!h->gain) return 0;
    const REAL *gr = h->gain + falcon_step_of_example(&b->src->ex, b->g_lo + l) * h->ldk;
    return RS(falcon_pow2_scale)(gr, b->n) != 1 || RS(falcon_pow2_scale)(w->Zb + l * w->ldn, b->n) != 1;
}

/* After the block's Kz: b->edge when one of its examples is stored scaled. */
static void RS(bb_edge_keys)(bb_blk *b)
{
    for (int64_t l = 0; l < b->G && !b->edge; l++) b->edge = RS(bb_scaled)(b, l);
}

/* M ([m][n], rows ldn) after a block of a regression head, *a its largest
 * magnitude before: b->edge when the block cancelled it (the forward's
 * falcon_block_cancels with F[L][0]; blk_run cuts such a block into
 * halves). *a becomes M's largest magnitude. Serves the memory (forward
 * sweep) and its adjoint (reverse sweep), whose end-to-start map is the
 * block's transposed. */
static void RS(bb_edge_cancel)(bb_blk *b, const REAL *M, double *a)
{
    if (!b->h->regression) return;
    const double a1 = RS(memory_amax)(M, b->w->ldn, b->m, b->n);
    if (b->Lc >= 2 && falcon_block_cancels(b->w->f0[b->Lc], *a, a1)) b->edge = 1;
    *a = a1;
}
