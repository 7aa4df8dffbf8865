/* The CPU framework for one precision (compiled once per precision by
 * run-cpu-f32.c and run-cpu-f64.c): one falcon_head per (b, h), heads in
 * parallel. Each head is independent and runs the same code whatever the
 * thread count, so results are bitwise reproducible across thread counts. */

#include "head_of.inc.c"

/* cpu: the backend's micro-kernels and the framework build that drives them
 * (one row of src/backends.c). S_in: the recurrent form's memory to start
 * from when st's is not a copy of it (NULL: st's own). */
falcon_status RS(falcon_run_cpu)(const falcon_config *cfg, const falcon_inputs *in,
                                 falcon_state *st, const double *S_in, void *out, const RS(falcon_cpu) *cpu)
{
    const RS(falcon_uk) *uk = cpu->uk;
    const RS(falcon_drivers) *fw = cpu->fw;
    const int direct_decay = falcon_direct_decay(cpu->direct_decay);
    const int64_t heads = in->B * in->H;
    const int threads = falcon_threads(cfg);
    falcon_status result = FALCON_OK;
    int64_t failed_task = INT64_MAX; /* the first task (in head order) that failed */
    /* Consecutive heads in groups (one per thread where possible) that
     * advance together in time blocks, reading the rows of a step's heads
     * together: faster than heads one by one (docs/performance.md,
     * "Measurements behind the library's choices"). */
    int64_t group = (heads + threads - 1) / threads;
    if (group > FALCON_HEAD_GROUP_MAX) group = FALCON_HEAD_GROUP_MAX;
    const int64_t tasks = (heads + group - 1) / group;
    const int64_t L = cfg->form == FALCON_FORM_CHUNK ? falcon_chunk_block(cfg->chunk, cfg->window)
                                                    : falcon_parallel_block(cfg->window);
    /* No more threads than tasks: a thread with nothing to do only waits at
     * the barrier, and slows the one that works (docs/performance.md). */
    const int team = (int64_t)threads < tasks ? threads : (int)tasks;
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
    for (int64_t task = 0; task < tasks; task++) {
        const int64_t h0 = task * group, count = heads - h0 < group ? heads - h0 : group;
        /* This thread's vector registers clean before the kernels: a pool
         * thread may carry a dirty state from before (finite-scan.c,
         * SCAN_CLEAN_UPPER), which slows the scalar backend's kernels. */
        falcon_clean_upper();
        RS(falcon_head) hd[FALCON_HEAD_GROUP_MAX];
        for (int64_t i = 0; i < count; i++) hd[i] = RS(head_of)(cfg, in, st, S_in, out, uk, direct_decay, h0 + i);
        falcon_status s = cfg->form == FALCON_FORM_RECURRENT ? fw->recurrent(hd, count)
                                                             : fw->blocked(hd, count, L);
        /* The status of the first failed task, not of the last one to
         * finish: the same for a thread count whatever the schedule. */
        if (s != FALCON_OK) {
#pragma omp critical(falcon_run_status)
            if (task < failed_task) failed_task = task, result = s;
        }
    }
    return result;
}
