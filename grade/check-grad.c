/*
 * Judging gradients (check-grad.h). The error is the gradient gate's
 * (gate_grad_compare: the normwise relative error, or, where the reference
 * is exactly 0 but its terms are not, ||X|| over the terms' norm), against
 * the threshold the export wrote with the reference's conditioning.
 *
 * Gradients are optional, as state.npy is: a case whose results hold none
 * is judged on its forward results and reported as not graded for
 * gradients (never as a gradient pass). Unlike out.npy, whose NaN is bad
 * input, a NaN or infinity in a gradient is a verdict: it fails. A backward
 * pass that overflows where the exact gradient is finite (the export keeps
 * every exact gradient within the set's range) computed a wrong result.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "check-grad.h"
#include "export-grad.h"
#include "../util/files.h"
#include "../util/paths.h"

int check_is_grad_file(const char *file) { return grad_tensor_of_file(file) >= 0; }

static int there(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The reference's and the result's arrays, both of the shape `shape`. */
static int read_pair(const char *name, const char *path, const char *refpath, json_t *shape, double **x,
                     double **r, int64_t *count)
{
    struct stat st;
    if (falcon_same_file(path, refpath))
        return cli_error("%s: '%s': is the reference '%s' itself (a link to it): a result is what the "
                         "implementation computed", name, path, refpath);
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return cli_error("%s: '%s': not a regular file (a result is a .npy file)", name, path);
    falcon_dtype dt;
    int64_t nr;
    int rc = check_read_array(name, path, path, shape, 0, x, count, &dt);
    if (!rc) rc = check_read_array(name, refpath, refpath, shape, 1, r, &nr, &dt);
    return rc;
}

/* One gradient t whose reference entry is e: judged into g. 0, or 2. */
static int judge_grad(const char *name, const char *rdir, const char *cdir, int t, json_t *e, double u,
                      check_grad *g)
{
    char path[4600], refpath[4600];
    snprintf(path, sizeof path, "%s/%s", rdir, grad_result_file(t));
    snprintf(refpath, sizeof refpath, "%s/%s", cdir, grad_ref_file(t));
    json_t *kappa = json_object_get(e, "kappa");
    g->has = 1;
    g->thr_u = json_number_value(json_object_get(e, "threshold_u"));
    g->kappa = json_is_null(kappa) ? INFINITY : json_number_value(kappa);
    const double abs_norm = json_number_value(json_object_get(e, "abs_norm"));
    if (!(g->thr_u > 0) || !json_is_array(json_object_get(e, "shape")) || !(g->kappa >= 1))
        return cli_error("%s: '%s/case.json': gradient %s: no threshold, shape or kappa", name, cdir,
                         gate_grad_name(t));
    g->status = CHECK_SKIP;
    if (!(g->given = there(path))) return 0;
    double *x = NULL, *r = NULL;
    int64_t count = 0;
    int rc = read_pair(name, path, refpath, json_object_get(e, "shape"), &x, &r, &count);
    g->finite = 1;
    for (int64_t i = 0; !rc && i < count; i++) g->finite &= isfinite(x[i]) != 0;
    if (!rc && g->finite) {
        /* The gate's own error, in units of fp64's roundoff (a power of two
         * from the relative error), then in the unit judged. */
        gate_grad_result res = {0}, ref = {0};
        res.count[t] = ref.count[t] = count;
        res.x[t] = x, ref.x[t] = r;
        ref.cond[t] = g->kappa, ref.abs_norm[t] = abs_norm;
        double err[GG_COUNT];
        gate_grad_compare(&res, &ref, FALCON_FP64, err);
        g->err_u = err[t] * gate_unit_roundoff(FALCON_FP64) / u;
    } else if (!rc) {
        g->err_u = INFINITY;
    }
    free(x), free(r);
    if (rc) return rc;
    g->status = !(g->err_u <= g->thr_u) ? CHECK_FAIL : g->thr_u * u <= CHECK_MAX_RELERR ? CHECK_PASS
                                                                                       : CHECK_UNJUDGEABLE;
    return 0;
}

int check_grads(const char *name, const char *rdir, const char *cdir, json_t *c, double u, check_case *out)
{
    json_t *grads = json_object_get(c, "gradients");
    if (grads && !json_is_object(grads))
        return cli_error("%s: '%s/case.json': \"gradients\" is not an object", name, cdir);
    for (int t = 0; t < GG_COUNT; t++) {
        char path[4600];
        snprintf(path, sizeof path, "%s/%s", rdir, grad_result_file(t));
        json_t *e = json_object_get(grads, gate_grad_name(t));
        if (!e && there(path))
            return cli_error("%s: '%s': a gradient the case has no reference for (%s): %s", name, path,
                             grads ? "the case has no such input or state" : "the set was exported without --grad",
                             grads ? "remove it" : "re-export the set with --grad, or remove it");
        if (e && judge_grad(name, rdir, cdir, t, e, u, &out->grad[t])) return 2;
        out->grad_ref |= out->grad[t].has;
        out->grad_given += out->grad[t].given;
    }
    return 0;
}
