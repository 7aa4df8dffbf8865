#!/usr/bin/env bash
# Seeded bugs: each mutant below is applied alone to a scratch copy of the
# tree, the gate is rebuilt and run, and the mutant must make it fail. Prints
# which tests caught each one. Usage: verify/mutants.sh [mutant-name ...]
# The copy is built once; each mutant then rebuilds only what its file
# reaches and is undone (source and build) before the next. The CUDA
# objects are left out (NVCC=/nonexistent): nothing here can run them, and
# nvcc would rebuild them for every mutant of the shared math.
# MUTANTS_FAIL_FAST=1 stops each gate run at its first failure (CI: the
# line names one catcher instead of all), and runs the test named in the
# mutant's last field before the rest:
# a caught mutant costs a second or so of gate instead of the 15-20 s the
# gate takes to reach most catchers (decay/million_steps alone holds one of
# two cores for about 16 s). Where that test passes, the whole gate runs as
# before, and the line says the named test no longer catches it.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)

# name | file | sed expression (must change the file) | a gate test that
# catches it (suite::test, run first under MUTANTS_FAIL_FAST)
mutants=(
"prefix-as-same|src/run_cpu.inc.c|s/\.prefix = cfg->align == FALCON_ALIGN_PREFIX,/.prefix = 0,/|decay::near_reset_then_slow"
"decay-skipped-recurrent|kernels/framework/recurrent.inc.c|s/const REAL alpha = h->alpha ? h->alpha\[t \* h->lds\] : (REAL)1;/const REAL alpha = (h->alpha \&\& t != 3) ? h->alpha[t * h->lds] : (REAL)1;/|decay::near_reset_then_slow"
"decay-skipped-blocked|kernels/framework/block-phases.inc.c|s/const double alpha = h->alpha ? /const double alpha = h->alpha \&\& c0 + j != 3 ? /|decay::near_reset_then_slow"
"eta-without-eps|kernels/common/falcon_math.h|s/#define FALCON_ETA(beta, eps, xz_sum) ((beta) \/ ((eps) + (xz_sum)))/#define FALCON_ETA(beta, eps, xz_sum) ((beta) \/ (xz_sum))/|decay::near_reset_then_slow"
"eta-with-norm-not-square|kernels/common/falcon_math.h|s/#define FALCON_ETA(beta, eps, xz_sum) ((beta) \/ ((eps) + (xz_sum)))/#define FALCON_ETA(beta, eps, xz_sum) ((beta) \/ ((eps) + sqrt(xz_sum)))/|decay::near_reset_then_slow"
"window-one-short|kernels/common/falcon_math.h|s/int64_t f = e - ex->window + 1;/int64_t f = e - ex->window + 2;/|decay::near_reset_then_slow"
"chunk-boundary-off-by-one|kernels/framework/block-phases.inc.c|s/g_lo = falcon_window_first(\&srcp->ex, e_first);/g_lo = falcon_window_first(\&srcp->ex, e_first) + (c0 > 0);/|decay::near_reset_then_slow"
"chunk-decay-boundary|kernels/framework/block-phases.inc.c|s/h->alpha\[(c0 + j) \* h->lds\] : 1.0;/h->alpha[(c0 + j - (c0 > 0 \&\& j == 0)) * h->lds] : 1.0;/|decay::near_reset_then_slow"
# The chunk form computes [Kz; Qz] only up to the columns its system and
# outputs read (kq_limits): one column short and they read what was not computed.
"kq-limit-window-short|kernels/framework/blocked.inc.c|s/if (limK\[l\] < before) limK\[l\] = before;/if (limK[l] < before - 1) limK[l] = before - 1;/|gate::3_FP64"
"kq-limit-output-short|kernels/framework/blocked.inc.c|s/        limQ\[j\] = before;/        limQ[j] = before - 1;/|gate::1A_TF32"
# The solve runs each row block over its nonzero q range only (trsm.inc.c):
# a range one short drops a coupling. update_read's 2-vector tail block
# (update-read.inc.c): a tail that steps past a vector leaves it unwritten.
"trsm-range-one-short|kernels/simd/trsm.inc.c|s/ldl, 1, mr, p0, \&q0, \&q1);/ldl, 1, mr, p0 > 0 ? p0 - 1 : 0, \&q0, \&q1);/|gate::1_FP32"
"update-read-tail-skips|kernels/simd/update-read.inc.c|s/        j += 2 \* VL;/        j += 3 * VL;/|ukernels::update_read"
# update_read's and rank_update's k <= 2 terms start from the last one's
# product: a sum from 0 in either turns a -0 element of S into +0.
"update-read-terms-from-zero|kernels/simd/update-read.inc.c|s/p\[v\] = i == kk - 1 ? v_mul(e, zv\[i\]\[v\]) : /p[v] = /|ukernels::update_read_signed_zero"
# The half-width table keeps Z in registers for k = 3 and 4 too: the same
# terms in the same order as the loads' path, or the tables disagree.
"update-read-register-terms-reversed|kernels/simd/update-read.inc.c|s/for (int i = kk - 1; i >= 0; i--) { \/\* the last term first, as below \*\//for (int i = 0; i < kk; i++) {/|ukernels::update_read"
# Keys at the limits of the precision (issue 14): the scaling that keeps x.x
# in range, and the places each form must undo it.
"key-scale-never-applied|kernels/common/falcon_math.h|s/if (amax == 0 /if (1 /|limits::gains_at_the_limits_fp32"
"key-scale-sigma-ignored|kernels/common/falcon_math.h|s/b = beta \/ sigma;/b = beta;/|limits::gains_at_the_limits_fp32"
"key-scale-small-sigma-ignored|kernels/common/falcon_math.h|s/        e = eps \/ sigma \/ tau;/        e = eps \/ tau;/|limits::keys_at_the_limits_fp32"
"residual-without-key-scale-recurrent|kernels/framework/recurrent.inc.c|s/s0 = xs\[0\];/s0 = 1;/|limits::gains_at_the_limits_fp32"
"window-scale-ratio-ignored-recurrent|kernels/framework/recurrent.inc.c|s/ci = scaled ? eta \* (xs\[i\] \/ sigma) : eta;/ci = eta;/|limits::keys_at_the_limits_fp32"
"residual-row-undecayed|kernels/framework/examples.inc.c|s/e\[r\] = c \* (y\[r\] - a \* p\[r\]);/e[r] = c * (y[r] - p[r]);/|decay::near_reset_then_slow"
"residual-without-key-scale-blocked|kernels/framework/block-phases.inc.c|s/sl = w->xs\[l\];/sl = 1;/|limits::gains_at_the_limits_fp32"
"system-without-key-scale-blocked|kernels/framework/block-phases.inc.c|s/ts\[p\] = eta\[j\] \* (rho \* xs\[term_l\[p\]\]);/ts[p] = eta[j] * rho;/|limits::gains_at_the_limits_fp32"
"gains-not-scaled-before-the-product|kernels/common/falcon_math.h|s/const R tau = falcon_pow2_scale_##SFX(g, n);/const R tau = 1;/|limits::subnormal_gains_fp32"
"rescaled-key-keeps-stale-xz-recurrent|kernels/framework/recurrent.inc.c|s/if ((xs\[k - 1\] = RS(falcon_key_scale)(xn, n)) == 1) break;/if ((xs[k - 1] = RS(falcon_key_scale)(xn, n)) > 0) break;/|limits::gains_at_the_limits_fp32"
"rescaled-keys-keep-stale-products-blocked|kernels/framework/block-phases.inc.c|s/!= 1) rescaled = 1;/!= 1) rescaled = 0;/g|limits::gains_at_the_limits_fp32"
# The feature maps' guards: l2norm's scaling by the largest magnitude, and 0 for 0.
"l2norm-without-max-scaling|kernels/common/falcon_math.h|s/R s = in\[i\] \/ amax;/R s = in[i];/;s/R norm = amax \* SQRT(ss);/R norm = SQRT(ss);/|limits::keys_at_the_limits_fp32"
"l2norm-zero-unguarded|kernels/common/falcon_math.h|s/if (amax == 0) {/if (0) {/|limits::keys_at_the_limits_fp32"
# A step without an example (prefix alignment, no previous key) on a memory
# that is not zero must still decay it and read it.
"empty-step-skips-decay-recurrent|kernels/framework/recurrent.inc.c|s/const REAL a = st.w, f = st.f;/const REAL a = st.k == 0 ? 1 : st.w, f = st.f;/|limits::step_without_example_on_a_set_memory"
"empty-step-reads-undecayed-recurrent|kernels/framework/recurrent.inc.c|/if (k == 0) {/,/return;/s/RS(rec_read_start)(m, a, pq, o)/RS(rec_read_start)(m, 1, pq, o)/|limits::step_without_example_on_a_set_memory"
"first-step-decay-skipped-blocked|kernels/framework/block-phases.inc.c|s/const double alpha = h->alpha ? /const double alpha = h->alpha \&\& c0 + j > 0 ? /|limits::near_resets_on_a_large_memory_fp32"
# Head groups of the drivers: the cap, and a last group that is not full;
# the fused write-and-read kernel's column tail.
"recurrent-group-uncapped|src/run_cpu.inc.c|s/if (group > FALCON_HEAD_GROUP_MAX) group = FALCON_HEAD_GROUP_MAX;//|limits::batches_beyond_the_head_group"
"dot2-copy-drops-tail|kernels/simd/gemm-nt.inc.c|s/                v_store_mask(dst + k, km, b\[j\]);/                (void)dst;/|ukernels::dot2_copy"
"update-read-drops-tail|kernels/simd/update-read.inc.c|s/UR_NAME(ur_block)(1, 1, v_mask(n - j), kk/UR_NAME(ur_block)(1, 1, v_mask(n - j - 1), kk/|decay::near_reset_then_slow"
# The drivers' check of each output row as they write it and of the memory
# as they store it (run.c no longer scans a CPU backend's results).
"output-rows-unchecked-recurrent|kernels/framework/recurrent.inc.c|s/            ck\[r\] += v - v;/            (void)ck;/|limits::large_values_fp32"
"output-rows-unchecked-recurrent-window|kernels/framework/recurrent.inc.c|s/        RS(finite_add)(ck, o, m);/        (void)o;/|validation::an_output_overflow_alone_is_reported_in_a_window"
"output-rows-unchecked-blocked|kernels/framework/block-phases.inc.c|s/ck\[c\] += v - v;/ck[c] += 0;/|limits::large_values_fp32"
# Direct operands (blocked.inc.c): the products read the caller's key
# and query rows; a key scaled for its normaliser packs them first, and a
# prefix alignment's keys are the rows one step back. The end-of-block
# write takes its coefficients from Zt, E [m][k] (rank-update.inc.c).
"keys-direct-scaled-unpacked|kernels/framework/block-phases.inc.c|s/for (int64_t r = 0; r < G; r++) memcpy(Xg + r \* ldn, b->Xa + r \* b->ldx, sizeof(REAL) \* (size_t)n);/(void)0;/|limits::keys_at_the_limits_fp32"
"keys-direct-prefix-ignored|kernels/framework/blocked.inc.c|s/row = h->prefix ? t - 1 : t;/row = t;/|gate::1_FP32"
"rank-update-coefficients-transposed|kernels/simd/rank-update.inc.c|s/\.P = E, \.rs = lde, \.cs = 1,/.P = E, .rs = 1, .cs = lde,/|ukernels::rank_update"
"transpose-avx-halves-swapped|kernels/framework/transpose.inc.c|s/_mm256_permute2f128_ps(r\[j\], r\[j + 4\], 0x20)/_mm256_permute2f128_ps(r[j], r[j + 4], 0x31)/|gate::1_FP32"
"decay-row-fused-last-factor|kernels/framework/block-phases.inc.c|s/        fq\[first\[i\] - 1\] = 1;/        fq[first[i] - 1] = 0;/|gate::1_FP32"
# (the call kept under if (0): it is the blocked unit's only use of check_memory,
# whose removal would be an unused-function error, not a bug the gate must see)
"memory-unchecked-at-store-blocked|kernels/framework/blocked.inc.c|s/        RS(check_memory)(c->ck, c->St, ldm, c->h->m, c->h->n);/        if (0) RS(check_memory)(c->ck, c->St, ldm, c->h->m, c->h->n);/|validation::a_memory_overflow_alone_is_reported"
"memory-unchecked-recurrent|kernels/framework/recurrent.inc.c|s/        RS(check_memory)(c->ck + r0, /        if (0) RS(check_memory)(c->ck + r0, /|validation::a_memory_overflow_alone_is_reported"
# The kept work memory (src/work-memory.c) and the drivers' use of blocks
# whose contents are left from another call (poisoned by the test).
"work-memory-too-small|src/work-memory.c|s/slot\[i\].bytes >= bytes/slot[i].bytes >= bytes \/ 2/|work_memory::kept_blocks_are_reused"
"work-memory-uncapped|src/work-memory.c|s/after <= falcon_work_keep_max/after > 0/|work_memory::kept_blocks_are_reused"
"work-memory-takes-any-larger|src/work-memory.c|s/slot\[i\].bytes \/ 2 <= bytes \&\&/1 \&\&/|work_memory::kept_blocks_are_reused"
"work-memory-handed-twice|src/work-memory.c|s/            slot\[best\].p = NULL;/            (void)0;/|work_memory::kept_blocks_are_reused"
"state-memory-not-zeroed|src/state.c|s/if (s->S \&\& zero_memory) memset/if (s->S \&\& zero_memory \&\& heads < 0) memset/|decay::near_reset_then_slow"
"system-upper-left-unset|kernels/framework/block-phases.inc.c|s/for (int64_t q = first\[j\]; q < p; q++) a\[q\] = 0;/(void)0;/|work_memory::reused_blocks_give_the_same_bits_scalar"
"readout-upper-left-unset|kernels/framework/block-phases.inc.c|s/for (int64_t p = first\[i\]; p < b->P; p++) w\[p\] = 0;/(void)0;/|work_memory::reused_blocks_give_the_same_bits_scalar"
# The phase clock's median read as the slowest block's time.
"phase-clock-median-is-max|kernels/framework/phase-clock.c|s/(seen += hist\[k\]) \* 2 >= n/(seen += hist[k]) >= n/|phase_clock::the_median_is_the_middle_block_not_the_mean"
# A phase mark that does not move the last mark on: each phase counted from the block's start.
"phase-clock-marks-overlap|kernels/framework/phase-clock.h|s/        k->last = now;/        (void)now;/|phase_clock::a_chunk_call_fills_it_with_phases_inside_the_call"
# The validation pass's scan: one vector of each step never looked at.
# The scan's clean-up of the vector registers before its baseline tail.
"scan-leaves-upper-dirty|src/finite-scan.c|s/    _mm256_zeroupper(); \/\* before the baseline tail: see SCAN_CLEAN_UPPER \*\//    (void)0;/|finite_scan::leaves_the_upper_halves_clean"
# The scalar kernels' row operations: one lane of a four-element step
# (the plain one, the one in the wider type, the near-reset decay's).
"scalar-axpy-wrong-lane|kernels/scalar/ukernels-scalar.inc.c|s/y2 = y\[c + 2\] + x \* v2/y2 = y[c + 3] + x * v2/|ukernels::update_read"
"scalar-wide-axpy-wrong-lane|kernels/scalar/ukernels-scalar.inc.c|s/y2 = (REAL)(y\[c + 2\] + w \* v2)/y2 = (REAL)(y[c + 3] + w * v2)/|gate::1A_TF32"
"scalar-tiny-decay-wrong-lane|kernels/scalar/rank-update-scalar.inc.c|s/t2 += e \* z\[2\]/t2 += e * z[1]/|gate::1_FP32"
"scan-avx512-skips-a-vector|src/finite-scan.c|s/_mm512_loadu_si512(v + 192)/_mm512_loadu_si512(v + 128)/|finite_scan::fp32_one_thread"
"scan-avx2-skips-a-vector|src/finite-scan.c|s/_mm256_loadu_si256(v + 3)/_mm256_loadu_si256(v + 2)/|finite_scan::fp32_one_thread"
# Falcon-1/1A's recurrent step (W = 1) writes the new key into the other of
# two X buffers; without the swap the pending write takes the new key.
"w1-keys-not-swapped|kernels/framework/recurrent.inc.c|s/if (e >= 0 \&\& c->cnt == W \&\& c->Xalt) {/if (0) {/|gate::1_FP32"
# The recurrent driver's column tiles (a memory larger than L1): each tile
# must start from the window the time block found.
# Lazy decay (recurrent.inc.c, fp32): the read of a lazy step scaled back,
# the fold ahead of a near reset, the fold bound, the factor kept in the
# state and per tile, and the second run where the divided memory overflows.
"lazy-read-unscaled|kernels/framework/recurrent.inc.c|s/const REAL v = a \* (pq\[r\] + zq \* e\[r\]);/const REAL v = a * pq[r] + zq * e[r];/|gate::1_FP32"
"lazy-window-read-unscaled|kernels/framework/recurrent.inc.c|s/        for (int64_t r = 0; lazy_step \&\& r < m; r++) o\[r\] \*= a;/        (void)0;/|gate::3_FP32"
# The lazy read's factor applied to z.q before the product, as it was: a
# subnormal z.q rounded up to 2^8 times deeper (subnormal queries).
"lazy-read-factor-first|kernels/framework/recurrent.inc.c|s/const REAL v = a \* (pq\[r\] + zq \* e\[r\]);/const REAL v = a * pq[r] + (zq * a) * e[r];/|subnormal_reads::falcon1"
"lazy-near-reset-one-subnormal-factor|kernels/framework/recurrent.inc.c|s/if (c->C != 1 \&\& C1 < (double)REAL_MIN) {/if (0) {/|limits::a_near_reset_after_lazy_steps_fp32"
# The near reset's fold of the memory, made in the step's pass: not passed
# on, or dropped by the SIMD pass, its own pass where there is no decay, or
# the scalar pass.
"lazy-near-reset-memory-not-folded|kernels/framework/recurrent.inc.c|s/        st->f = f;/        (void)0;/|limits::a_near_reset_after_lazy_steps_fp32"
"update-read-fold-dropped|kernels/simd/update-read.inc.c|s/if (fold) x\[v\] = v_mul(fv, x\[v\]);/if (fold) x[v] = ((void)fv, x[v]);/|ukernels::update_read"
"update-read-fold-alone-dropped|kernels/simd/update-read.inc.c|s/S\[row \* lds + c\] \*= f;/S[row * lds + c] *= 1;/|ukernels::update_read"
"scalar-update-read-fold-dropped|kernels/scalar/update-read-scalar.inc.c|s/if (f != 1) RS(scale_row)(n, f, s);/(void)f;/|ukernels::update_read"
"lazy-fold-bound-ignored|kernels/framework/recurrent.inc.c|s/if (C1 >= FALCON_LAZY_SCALE_MIN) {/if (C1 > 0) {/|lazy_decay::the_state_holds_the_memory_and_its_scale"
"lazy-scale-not-stored|kernels/framework/recurrent.inc.c|s/if (store) \*c->h->scale = c->C;/(void)0;/|segments::falcon1"
"lazy-scale-not-replayed-per-tile|kernels/framework/recurrent.inc.c|s/        c->C = c->C0;/        (void)0;/|columns::fp32_n64_m256"
"lazy-overflow-not-rerun|kernels/framework/recurrent.inc.c|s/        if (!again\[i\]) continue;/        continue;/|limits::large_values_lazy_decay_fp32"
# The second run: the whole call direct (the split then differs), a step
# taken again without the factor folded, or from the memory the failed step
# left instead of the one it found.
"lazy-rerun-whole-call-direct|kernels/framework/recurrent.inc.c|s/    const int64_t m = h->m;/    const int64_t m = h->m; for (int64_t r0 = 0; r0 < m; r0 += c.mt) RS(rec_fold)(\&c, r0, RS(rec_tile_width)(\&c, r0), (REAL)c.C); c.C = 1; c.lazy = 0;/|limits::lazy_decay_rerun_splits_bitwise_fp32"
"lazy-rerun-factor-not-folded|kernels/framework/recurrent.inc.c|s/RS(rec_fold)(\&c, r0, RS(rec_tile_width)(\&c, r0), (REAL)c.C);/RS(rec_fold)(\&c, r0, RS(rec_tile_width)(\&c, r0), (REAL)1);/|limits::large_values_lazy_decay_fp32"
"lazy-rerun-memory-not-restored|kernels/framework/recurrent.inc.c|s/        memcpy(c.mem, kept, c.mem_used);/        (void)kept;/|limits::large_values_lazy_decay_fp32"
"checkpoint-scale-not-loaded|src/checkpoint.c|s/const int arrays = m->version == 1 ? NUM_ARRAYS_V1 : NUM_ARRAYS;/const int arrays = NUM_ARRAYS_V1;/|lazy_decay::a_checkpoint_continues_the_stream_bit_for_bit"
"tile-window-not-restored|kernels/framework/recurrent.inc.c|s/        if (r0 > 0) RS(rec_window_keep)(c, 1);/        (void)0;/|columns::fp32_n64_m256"
"recurrent-groups-rounded-down|src/run_cpu.inc.c|s/const int64_t tasks = (heads + group - 1) \/ group;/const int64_t tasks = heads \/ group;/|limits::batches_beyond_the_head_group"
# The operand formats (docs/math.md section 11): tf32 rounded as bf16 (8
# times its errors), no rounding at all (errors 2^-13 of tf32's unit), the
# memory rounded in place instead of its copy, ties away from zero.
"tf32-rounded-as-bf16|src/config.c|s/return p == FALCON_TF32 ? FALCON_TF32_DROP/return p == FALCON_TF32 ? FALCON_BF16_DROP/|gate::1_TF32"
"operands-never-rounded|kernels/framework/block-phases.inc.c|s/const int drop = h->operand_drop;/const int drop = 0;/|operands::bf16_rounding_happened"
"memory-rounded-in-place|kernels/framework/block-phases.inc.c|s/RS(round_operand)(w->Sr, n, m, ldm, drop);/RS(round_operand)(St, n, m, ldm, drop);/|operands::the_memory_keeps_fp32"
"state-range-unchecked|src/validate.c|s/    return falcon_state_check(st, cfg->precision);/    return FALCON_OK;/|validation::a_memory_an_fp64_run_left_is_checked"
"state-range-tie-accepted|src/validate.c|s/limit_above(nextafter((double)FLT_MAX + 0x1p103, 0.0))/limit_above((double)FLT_MAX + 0x1p103)/|validation::a_memory_at_the_edge_of_float32"
"fp64-memory-trusted|src/run.c|s/work->memory_f32 = cfg->precision != FALCON_FP64;/work->memory_f32 = 1;/|validation::a_memory_an_fp64_run_left_is_checked"
# Structured errors (falcon_last_error_info): the head of a batch's bad
# value counted within its batch only; the step not counted from t0.
"error-info-head-without-batch|src/validate.c|s/flat, t, b \* in->H + h);/flat, t, b * 0 * in->H + h);/|validation::error_info_names_input_rule_index_step_head"
"error-step-from-segment|src/validate.c|s/const int64_t h = row % in->H, t = t0 + (row \/ in->H) % in->T,/const int64_t h = row % in->H, t = t0 * 0 + (row \/ in->H) % in->T,/|validation::error_info_names_input_rule_index_step_head"
"mpfr-memory-kept-in-double|reference/ref_backend.c|s/Sh\[i\] = prec != FALCON_FP64 ? (double)(float)S\[i\] : S\[i\];/Sh[i] = S[i];/|validation::a_memory_overflow_alone_is_reported"
"operand-ties-away|kernels/common/falcon_math.h|s/b.u = (b.u + (low >> 1) + ((b.u >> drop) \& 1u)) \& ~low;/b.u = (b.u + (low >> 1) + 1u) \& ~low;/|operands::rounding_at_the_edges"
# One product's operands left unrounded (blocked.inc.c): within every
# threshold, since the gate's q, k and v are on the format's grid already
# and one fp32 operand only lowers the error; operand_model compares the
# block with a plain model of SPEC section 6 to a few fp32 units.
"operands-R-unrounded-after-solve|kernels/framework/block-phases.inc.c|s/    if (drop) RS(round_operand)(R, P, m, ldm, drop), RS(round_operand)(w->Wm, b->Lc, P, ldp, drop);/    if (drop) RS(round_operand)(w->Wm, b->Lc, P, ldp, drop);/|operand_model::tf32"
"operands-read-matrix-unrounded|kernels/framework/block-phases.inc.c|s/    if (drop) RS(round_operand)(R, P, m, ldm, drop), RS(round_operand)(w->Wm, b->Lc, P, ldp, drop);/    if (drop) RS(round_operand)(R, P, m, ldm, drop);/|operand_model::tf32"
"operands-end-state-unrounded|kernels/framework/block-phases.inc.c|s/        if (drop) RS(round_operand)(R, P, m, ldm, drop);/        (void)0;/|operand_model::tf32"
"operands-end-state-window-unrounded|kernels/framework/block-phases.inc.c|s/        if (drop) RS(round_operand)(Rg, G, m, ldm, drop);/        (void)0;/|operand_model::tf32"
"operands-memory-copy-unrounded|kernels/framework/block-phases.inc.c|s/        RS(round_operand)(w->Sr, n, m, ldm, drop);/        (void)0;/|operand_model::tf32"
"operands-directions-unrounded|kernels/framework/block-phases.inc.c|s/            if (h->gain) RS(round_operand)(w->Zbuf, G, n, ldn, drop);/            (void)0;/|operand_model::tf32"
"operands-keys-queries-unrounded|kernels/framework/block-phases.inc.c|s/            RS(round_operand)(w->XQ, G + b->Lc, n, ldn, drop);/            (void)0;/|operand_model::tf32"
# The rule that keeps the fp32 recurrent form's decay direct (Zen 5's
# full-width AVX-512, src/backends.c) ignored, or not handed to the heads.
"direct-decay-ignored|kernels/framework/recurrent.inc.c|s/ \&\& !h->direct_decay;/;/|lazy_decay::a_backend_that_decays_directly_keeps_no_factor"
"direct-decay-not-passed|src/run_cpu.inc.c|s/\.direct_decay = direct_decay,/.direct_decay = direct_decay * 0,/|lazy_decay::a_backend_that_decays_directly_keeps_no_factor"
# A large carried memory projected away (blocked.inc.c, blk_run): the
# cancelling block never cut, or its halves run from the memory the whole
# block left instead of the one it found.
"carried-memory-never-cut|kernels/framework/blocked.inc.c|s/!falcon_block_cancels(f, a0, c->amax)/!falcon_block_cancels(f, a0, 1e300 * c->amax)/|carried_memory::1_FP32"
"carried-memory-cut-not-restored|kernels/framework/blocked.inc.c|s/    for (int64_t r = 0; r < n; r++) memcpy(c->St + r \* ldm, w->S0 + r \* ldm, sizeof(REAL) \* (size_t)m);/    (void)0;/|carried_memory::1_FP32"
# An output's temporary registered for the signal clean-up only after it was
# made (outputs.c, TEMP_FIRST): a signal delivered as mkostemp (or mkdtemp)
# returns leaves it.
"temp-registered-after-made|src/outputs.c|/falcon_reg_add(s->temp, REG_FILE); \/\* before it exists/{h;d};/s->fd = made_file(mkostemp(s->temp, O_CLOEXEC));/G|outputs::a_signal_as_a_temporary_is_made"
"temp-dir-registered-after-made|src/outputs.c|/falcon_reg_add(s->temp, REG_DIR); \/\* before it exists/{h;d};/const int made = made_dir(mkdtemp(s->temp)) != NULL;/G|outputs::a_signal_as_a_temporary_is_made"
)

# failed_tests OUTPUT: the suite::test names of the gate's [FAIL] lines in OUTPUT.
failed_tests() { printf '%s\n' "$1" | sed -n 's/.*\[FAIL\] \([^ :]*::[^: ]*\).*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//'; }

# Every edit must still apply: a mutant whose sed no longer matches (its
# line was rewritten) would otherwise be found only after the copy is built
# and every mutant before it has run. Checked first, on the sources alone;
# `verify/mutants.sh --edits-only` stops here (make check runs it).
edits_only=0
if [ "${1:-}" = --edits-only ]; then edits_only=1; shift; fi
want=("$@")
stale=0
for entry in "${mutants[@]}"; do
    IFS='|' read -r name file expr catcher <<<"$entry"
    if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
    if sed "$expr" "$root/$file" | cmp -s - "$root/$file"; then
        echo "mutant $name: the edit does not apply to $file"; stale=$((stale + 1))
    fi
done
if [ $stale -gt 0 ] || [ $edits_only -eq 1 ]; then
    [ $stale -eq 0 ] && echo "mutants: all ${#mutants[@]} edits apply"
    exit $((stale > 0))
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
tree=$scratch/tree
# -O1, as the sanitizers' gate (mk/sanitize.mk): the sources mean the same at
# either level (ISO C: no contraction; no undefined behaviour, which the
# sanitizers watch for), and a mutant's rebuild is what its time is: 33 s
# for a micro-kernel source (its six tables, the SIMDe ones 20 s each at
# -O2, 12-13 at -O1) and 8 s for the framework's (six drivers, -O3) at -O2;
# at -O1 the gate takes 27 s against 25 (2 cores, Zen 5).
# Where the CPU runs AVX-512 the gate runs the AVX-512 tables natively, so the
# SIMDe-emulated copies of the same sources (which stand in for them on AVX2
# machines) are left out: they were 12-13 s of a micro-kernel mutant's
# 22-25 s of rebuild at -O1. Since update_read has units of its own, a
# mutant of another kernel rebuilds the four small tables (3-4 s, against
# 9-13 when they held update_read), and a mutant of update_read its four
# units (9-10 s).
no_simde=
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then no_simde=SIMDE_HEADER=/nonexistent; fi
mk() { make -C "$tree" -s -j"$(nproc)" BUILD=build OPT=-O1 NVCC=/nonexistent $no_simde "$@"; }
mkdir -p "$tree"
(cd "$root" && tar --exclude=./build --exclude='./build-*' --exclude=./.git -cf - .) | tar -C "$tree" -xf -
if ! mk build/falcon-verify >"$scratch/build.log" 2>&1; then
    echo "mutants: the unmutated tree does not build"; tail -20 "$scratch/build.log"; exit 1
fi
# The unmutated build, put back after each mutant with the source's own
# time, so that the next mutant rebuilds only what its own file reaches
# (touching the restored source made every mutant rebuild its predecessor's
# objects too: about half of a mutant's time).
cp -a "$tree/build" "$scratch/build.clean"
caught=0; missed=0
for entry in "${mutants[@]}"; do
    IFS='|' read -r name file expr catcher <<<"$entry"
    if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
    # native AVX-512 code (not the SIMDe build) runs only where the CPU has it
    if [[ $name == scan-avx512-* ]] && ! grep -qw avx512f /proc/cpuinfo; then
        echo "mutant $name: skipped (no AVX-512 on this CPU)"; continue
    fi
    cp -p "$tree/$file" "$scratch/original"
    sed -i "$expr" "$tree/$file" # it applies: checked above
    built=1; t0=$SECONDS
    mk build/falcon-verify >"$scratch/build.log" 2>&1 || built=0
    t1=$SECONDS
    failing=; note=
    if [ $built -eq 1 ] && [ -n "${MUTANTS_FAIL_FAST:-}" ] && [ -n "$catcher" ]; then
        failing=$(failed_tests "$("$tree/build/falcon-verify" --fail-fast --filter="${catcher/::/\/}" 2>&1)")
        [ -n "$failing" ] || note=" (its named catcher $catcher passed)"
    fi
    if [ $built -eq 1 ] && [ -z "$failing" ]; then
        failing=$(failed_tests "$("$tree/build/falcon-verify" --jobs="$(nproc)" ${MUTANTS_FAIL_FAST:+--fail-fast} 2>&1)")
    fi
    took="build $((t1 - t0)) s, gate $((SECONDS - t1)) s"
    # Undo it: the original back with its time, and the unmutated build.
    cp -p "$scratch/original" "$tree/$file"
    rm -rf "$tree/build" && cp -a "$scratch/build.clean" "$tree/build"
    if [ $built -eq 0 ]; then
        echo "mutant $name: does not build"; tail -5 "$scratch/build.log"; missed=$((missed + 1)); continue
    fi
    if [ -n "$failing" ]; then
        echo "mutant $name: caught by $failing$note ($took)"; caught=$((caught + 1))
    else
        echo "mutant $name: NOT caught$note ($took)"; missed=$((missed + 1))
    fi
done
echo "$caught passed, $missed failed"
[ "$missed" -eq 0 ]
