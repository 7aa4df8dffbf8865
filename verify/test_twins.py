#!/usr/bin/env python3
"""The grader must never pass a wrong kernel: every wrong twin of
examples/numpy_falcon.py (examples/falcon_twins.py) must fail `falcon check`
on the quick case set, in every layout that can express it.

    verify/test_twins.py path/to/falcon WORKDIR [--twins a,b] [--layouts falcon,fla]

In WORKDIR: exports the quick set in each layout (falcon, fla, ggml); the
correct implementation must pass there in float64 (fp64 units), float32
(fp32 units) and float16 (fp16 units, the cases half cannot hold declared
skipped by the example itself). Then each twin x layout runs in float32 on
the cases of its feature (the twin's `applies`), the other cases declared
skipped in the manifest, and `falcon check --precision fp32` must exit 1:

    twin <name> [<layout>]: FAIL as it should (k of N cases)
    twin <name> [<layout>]: PASSES: no case exercises <feature> (...)

A twin that passes is a failing test: the set has no case that catches the
mistake. Exit status 2 of the check (bad input) is reported as an error.
Ends with "N passed, M failed"; exits 1 if any failed.
"""
import argparse
import multiprocessing
import json
import os
import shutil
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import falcon_suite  # noqa: E402
import falcon_twins  # noqa: E402
import numpy_falcon  # noqa: E402

LAYOUTS = ("falcon", "fla", "ggml")
CORRECT = (("float64", "fp64"), ("float32", "fp32"), ("float16", "fp16"))
FIRST_TRY = 6  # cases a twin is tried on before all the cases of its feature
counts = {"passed": 0, "failed": 0}


def ok(line):
    counts["passed"] += 1
    print(line, flush=True)


def bad(line):
    counts["failed"] += 1
    print(line, flush=True)


def export(fbin, work, layout, precision="fp32"):
    d = os.path.join(work, "cases-%s-%s" % (layout, precision))
    subprocess.run([fbin, "cases", "export", d, "--profile", "quick", "--layout", layout, "--precision",
                    precision, "--quiet"], check=True)
    with open(os.path.join(d, "index.json")) as f:
        index = json.load(f)
    cases = [falcon_suite.load_case(os.path.join(d, e.get("dir", e["name"]))) for e in index["cases"]]
    return d, cases


def write_results(rdir, results, skip):
    """results: [(name, out, state)]; skip: {name: why}. Plain np.save: the
    harness's own scratch files, not the example's atomic writer."""
    if os.path.exists(rdir):
        shutil.rmtree(rdir)
    os.makedirs(rdir)
    for name, out, state in results:
        os.mkdir(os.path.join(rdir, name))
        np.save(os.path.join(rdir, name, "out.npy"), out)
        np.save(os.path.join(rdir, name, "state.npy"), state)
    with open(os.path.join(rdir, "manifest.json"), "w") as f:
        json.dump({"skip": skip}, f)


def check(fbin, cdir, rdir, precision):
    """(exit status, JSON report or None, last stderr line)."""
    jpath = rdir + ".json"
    if os.path.exists(jpath):
        os.unlink(jpath)
    p = subprocess.run([fbin, "check", cdir, "--results", rdir, "--precision", precision, "--json", jpath],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    doc = None
    if p.returncode in (0, 1) and os.path.exists(jpath):
        with open(jpath) as f:
            doc = json.load(f)
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    return p.returncode, doc, (err[-1] if err else "")


def correct_run(fbin, work, layout, cdir, cases, dtype, prec):
    """The correct example in one dtype, judged in its units: (good, line).
    Half runs on the set exported in fp16 (inputs exact in half: an fp32
    set's subnormal keys and fp32-only decays are no half inputs)."""
    dt = np.dtype(dtype).type
    results, skip = [], {}
    for c in cases:
        why = numpy_falcon.half_unfit(c) if dt is np.float16 else None
        if why:
            skip[c.name] = "float16: " + why
        else:
            results.append((c.name,) + numpy_falcon.run_case(c, dt))
    rdir = os.path.join(work, "r-%s-%s" % (layout, dtype))
    write_results(rdir, results, skip)
    rc, doc, err = check(fbin, cdir, rdir, prec)
    shutil.rmtree(rdir)
    what = "correct example [%s] in %s passes check --precision %s" % (layout, dtype, prec)
    if rc == 0:
        return True, "ok   %s (%d cases, %d skipped)" % (what, len(results), len(skip))
    worst = ""
    if doc:
        failed = [c["name"] for c in doc["cases"] if c["status"] == "fail"]
        worst = ": %d failed, e.g. %s" % (len(failed), ", ".join(failed[:3]))
    return False, "FAIL %s: status %d%s %s" % (what, rc, worst, err)


def cost(c):
    return max(c.T, 1) * c.B * c.H


def twin_try(fbin, work, layout, cdir, cases, cls, sel):
    """The twin on the cases sel, the set's others declared skipped:
    (check's status, its JSON report, its last error line)."""
    results = [(c.name,) + cls(c, np.float32).run() for c in sel]
    chosen = {c.name for c in sel}
    skip = {c.name: "twin harness: not a case of %s" % cls.feature for c in cases if c.name not in chosen}
    rdir = os.path.join(work, "t-%s-%s" % (layout, cls.name))
    write_results(rdir, results, skip)
    out = check(fbin, cdir, rdir, "fp32")
    shutil.rmtree(rdir)
    return out


def caught(rc, err):
    """check failed the results (1), or refused a NaN or an infinity in them
    (2): never a pass."""
    return rc == 1 or (rc == 2 and "must be finite" in err)


def twin_run(fbin, work, layout, cdir, cases, cls):
    """(good, line). A twin needs one case of its feature that fails: the
    cheapest FIRST_TRY of them are tried first, and all of them only when
    none of those fails (so a passing twin is always judged on every case
    of its feature)."""
    head = "twin %s [%s]" % (cls.name, layout)
    sel = [c for c in cases if cls.applies(c)]
    if not sel:
        return False, "%s: PASSES: no case exercises %s (no case of the set has it)" % (head, cls.feature)
    try:
        first = sorted(sel, key=cost)[:FIRST_TRY]
        rc, doc, err = twin_try(fbin, work, layout, cdir, cases, cls, first)
        tried = first
        if not caught(rc, err) and len(first) < len(sel):
            rc, doc, err = twin_try(fbin, work, layout, cdir, cases, cls, sel)
            tried = sel
    except Exception as e:  # a defect of the twin itself: report, do not stop
        return False, "%s: ERROR: the twin raised %s: %s" % (head, type(e).__name__, e)
    if rc == 1:
        return True, "%s: FAIL as it should (%d of %d cases of %d)" % (
            head, doc["counts"]["fail"] if doc else -1, len(tried), len(sel))
    if rc == 2 and "must be finite" in err:
        return True, "%s: refused as it should (a non-finite result: %s)" % (head, err.strip()[-90:])
    if rc == 0:
        worst = max((c.get("ratio") or 0.0 for c in doc["cases"] if c["status"] == "pass"), default=0.0)
        return False, ("%s: PASSES: no case exercises %s (%d cases of the feature, none fails; largest error "
                       "%.2f of its threshold)" % (head, cls.feature, len(sel), worst))
    return False, "%s: ERROR: falcon check exited %d: %s" % (head, rc, err)


# ---- the twins' self-test, on synthetic cases ----
def synthetic(layout, variant, phi, align, T, B=2, H=2, seed=0, cu=None, qk_heads=None, head_map="interleaved"):
    """A case namespace as falcon_suite.load_case gives, made up here, that has
    every feature a twin keys on: several batch rows and heads, a carried
    state (memory, a previous key on some heads only, a full window
    history, a non-zero stored key where has_prev is false), decay, gains,
    a beta = 0 step and betas above 1, exact zeros and tiny rows (1e-160,
    whose x.x underflows) in the keys and queries, a head whose values are
    subnormal, a read scale outside the falcon layout. cu: packed offsets
    (B = 1, a state row per sequence); qk_heads: grouped q/k heads."""
    regression, has_window = numpy_falcon.SUPPORTED[variant]
    rng = np.random.default_rng(seed)
    n = 4
    m = n if layout == "ggml" else 3
    W = 3 if has_window else 1
    hq = qk_heads or H
    q, k = rng.standard_normal((2, B, T, hq, n))
    if T > 2:
        q[0, 1, 0, :2] = k[0, 1, 0, :2] = 0.0
        q[-1, 2, -1] *= 1e-160
        k[-1, 2, -1] *= 1e-160
    v = rng.standard_normal((B, T, H, m))
    beta = rng.uniform(0, 2 if regression else 1, (B, T, H))
    if T:
        beta[0, min(3, T - 1), 0] = 0.0
    rows = B if cu is None else len(cu) - 1
    heads = rows * H
    st = {"S": rng.standard_normal((heads, m, n)), "prev_key": rng.standard_normal((heads, n)),
          "has_prev": np.arange(heads) % 2 == 0, "hist_k": rng.standard_normal((heads, W - 1, n)),
          "hist_v": rng.standard_normal((heads, W - 1, m)), "hist_len": np.full(heads, W - 1)}
    if H > 1:  # the last head's values and memory subnormal
        v[:, :, -1] *= 1e-310
        for b in range(rows):
            st["S"][b * H + H - 1] *= 1e-310
            st["hist_v"][b * H + H - 1] *= 1e-310
    return SimpleNamespace(
        name="synthetic-%s-%s-%s-%s-T%d" % (layout, variant, phi, align, T), variant=variant, align=align,
        phi=phi, eps=1e-6, window=W, B=B, T=T, H=H, n=n, m=m, layout=layout, decay="random",
        scale=1.0 if layout == "falcon" else 1.0 / np.sqrt(n), q=q, k=k, v=v, beta=beta,
        alpha=rng.uniform(0.5, 1.0, (B, T, H)), g=None,
        gain=rng.uniform(0, 2, (B, T, H, n)) if variant in numpy_falcon.GAINS else None, state_in=st,
        cu_seqlens=None if cu is None else np.asarray(cu, dtype=np.int64), qk_heads=hq, head_map=head_map)


def synthetic_set(layout):
    phis = ("identity", "relu", "elu1", "l2norm")
    cases = [synthetic(layout, var, phi, ("prefix", "same")[i % 2], 9, seed=10 * j + i)
             for j, var in enumerate(numpy_falcon.SUPPORTED) for i, phi in enumerate(phis)]
    cases += [synthetic(layout, "falcon3", "identity", "prefix", 70, seed=1),
              synthetic(layout, "falcon1", "identity", "prefix", 1001, B=1, H=1, seed=2),
              synthetic(layout, "falcon1", "identity", "same", 1, seed=3),
              synthetic(layout, "falcon1", "identity", "prefix", 0, seed=4)]
    if layout != "ggml":  # packed batches and grouped heads (ggml's op has neither)
        cu = [0, 0, 1, 10, 10, 13, 29]
        cases += [synthetic(layout, "falcon3", "identity", "prefix", 29, B=1, H=2, seed=5, cu=cu),
                  synthetic(layout, "falcon1a", "elu1", "same", 11, H=4, seed=6, qk_heads=2),
                  synthetic(layout, "falcon2", "identity", "prefix", 11, H=4, seed=7, qk_heads=2, head_map="tiled"),
                  synthetic(layout, "falcon3a", "identity", "prefix", 29, B=1, H=4, seed=8, cu=cu, qk_heads=2)]
    return cases


def norm(x):
    """||x||_F without underflow (the memories here reach 1e-300)."""
    big = float(np.max(np.abs(x), initial=0.0))
    return big * float(np.linalg.norm(x / big)) if big > 0 else 0.0


def head_change(a, b, shape):
    """The largest normwise relative change over the heads (b, h) of an
    output [B,T,H,m] (shape 'out') or a state [B,H,.,.]."""
    worst = 0.0
    for i in np.ndindex(a.shape[0], a.shape[2] if shape == "out" else a.shape[1]):
        x = a[i[0], :, i[1]] if shape == "out" else a[i]
        y = b[i[0], :, i[1]] if shape == "out" else b[i]
        if x.shape != y.shape or not np.all(np.isfinite(y)):
            return np.inf
        nrm = norm(x)
        worst = max(worst, norm(y - x) / (nrm if nrm > 0 else 1.0))
    return worst


def selftest(sets, cls):
    """The twin computes something else (in float64, a relative change over
    1e-12 on some head) on a synthetic case of its feature, and nothing else
    on every case its `applies` leaves out: the harness's case selection
    skips no case where the twin acts."""
    head = "selftest %s" % cls.name
    acts, chosen, outside = 0, 0, []
    for c, (out, state) in sets[cls.layouts[0]]:  # the twins act alike in every layout
        if True:
            try:
                o2, s2 = cls(c, np.float64).run()
            except Exception as e:
                bad("FAIL %s: raised %s on %s: %s" % (head, type(e).__name__, c.name, e))
                return
            change = max(head_change(out, o2, "out"), head_change(state, s2, "state"))
            if cls.applies(c):
                chosen += 1
                acts += change > 1e-12
            elif change > 1e-12:
                outside.append(c.name)
    if outside:
        bad("FAIL %s: acts on %d synthetic cases its feature (%s) leaves out, e.g. %s" % (
            head, len(outside), cls.feature, outside[0]))
    elif not acts:
        bad("FAIL %s: computes what the correct code does on all %d synthetic cases of its feature" % (
            head, chosen))
    else:
        ok("ok   %s: acts on %d of %d synthetic cases of its feature, on no other" % (head, acts, chosen))


def l2norm_test():
    """The example's l2norm is x / ||x|| for subnormal, huge and zero
    vectors in float32 and float16 (a plain x / sqrt(x.x) underflows or
    overflows on the first two)."""
    f32 = [np.array([3e-40, -4e-40, 0.0]), np.array([3e30, 4e30, 0.0]), np.zeros(3), np.array([3.0, 4.0, 0.0])]
    f16 = [np.array([3e-7, -4e-7, 0.0]), np.array([3e4, 4e4, 0.0]), np.zeros(3)]
    worst = 0.0
    for dt, rows in ((np.float32, f32), (np.float16, f16)):
        f = numpy_falcon.Falcon(SimpleNamespace(variant="falcon1", window=1, align="same", phi="l2norm",
                                                eps=1e-6, scale=1.0), dt)
        for x in rows:
            x = x.astype(dt).astype(np.float64)  # exact in dt
            want = x / np.linalg.norm(x) if np.any(x) else x
            got = f.phi(x).astype(np.float64)
            if not np.all(np.isfinite(got)):
                worst = np.inf
            else:
                worst = max(worst, float(np.max(np.abs(got - want))) / float(np.finfo(dt).eps))
    what = "the example's l2norm of subnormal, huge and zero vectors (float32, float16)"
    if worst <= 4:
        ok("ok   %s: within %.1f ulp" % (what, worst))
    else:
        bad("FAIL %s: off by %.3g ulp" % (what, worst))


def cli_test(fbin, work, cdir, cases, name):
    """The example's command line: --bug NAME --only CASES writes the chosen
    cases, declares the others skipped, and `falcon check` fails it."""
    cls = falcon_twins.TWINS[name]
    chosen = [c.name for c in cases if cls.applies(c)][:2]
    rdir = os.path.join(work, "cli")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "numpy_falcon.py"), cdir, rdir,
                        "--dtype", "float32", "--bug", name, "--only", ",".join(chosen)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rc, doc, err = check(fbin, cdir, rdir, "fp32") if p.returncode == 0 else (-1, None, p.stdout)
    what = "numpy_falcon.py --bug %s --only (2 cases): the rest skipped, check fails" % name
    if rc == 1 and doc["counts"]["fail"] == 2 and doc["counts"]["skip"] == len(cases) - 2:
        ok("ok   " + what)
    else:
        bad("FAIL %s: status %d, %s %s" % (what, rc, doc and doc["counts"], err.strip()[-300:]))


def run_job(job):
    fn, args = job
    with np.errstate(all="ignore"):  # a twin's overflow is its verdict, not the harness's
        return fn(*args)


def jobs_count():
    """Worker processes: the cores this process may use (TWINS_JOBS sets it)."""
    if os.environ.get("TWINS_JOBS"):
        return max(1, int(os.environ["TWINS_JOBS"]))
    return max(1, len(os.sched_getaffinity(0)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("falcon", help="the falcon binary")
    ap.add_argument("work", help="a scratch directory (the case sets and results go there)")
    ap.add_argument("--twins", default="", help="comma-separated twin names (default all)")
    ap.add_argument("--layouts", default=",".join(LAYOUTS), help="comma-separated layouts")
    ap.add_argument("--no-correct", action="store_true", help="skip the correct implementation's runs")
    ap.add_argument("--no-selftest", action="store_true", help="skip the twins' self-test")
    a = ap.parse_args()
    names = [n for n in a.twins.split(",") if n] or list(falcon_twins.TWINS)
    unknown = [n for n in names if n not in falcon_twins.TWINS]
    if unknown:
        ap.error("no twin %s" % ", ".join(unknown))
    start = time.time()
    layouts = a.layouts.split(",")
    l2norm_test()
    if not a.no_selftest:
        with np.errstate(all="ignore"):
            sets = {}
            for layout in {falcon_twins.TWINS[n].layouts[0] for n in names}:
                cases = synthetic_set(layout)
                sets[layout] = [(c, numpy_falcon.Falcon(c, np.float64).run()) for c in cases]
            for name in names:
                selftest(sets, falcon_twins.TWINS[name])
        print("self-test: %.0f s" % (time.time() - start), flush=True)
    sets = {}
    for layout in filter(None, layouts):
        sets[layout] = export(a.falcon, a.work, layout)
        print("quick set [%s]: %d cases" % (layout, len(sets[layout][1])), flush=True)
        if not a.no_correct:
            sets[layout, "fp16"] = export(a.falcon, a.work, layout, "fp16")
    jobs = []
    for layout in filter(None, layouts):
        for dtype, prec in ([] if a.no_correct else CORRECT):
            cdir, cases = sets[layout, "fp16"] if prec == "fp16" else sets[layout]
            jobs.append((correct_run, (a.falcon, a.work, layout, cdir, cases, dtype, prec)))
        for name in names:
            if layout in falcon_twins.TWINS[name].layouts:
                jobs.append((twin_run, (a.falcon, a.work, layout) + sets[layout] + (falcon_twins.TWINS[name],)))
    with multiprocessing.get_context("fork").Pool(jobs_count()) as pool:
        for good, line in pool.imap(run_job, jobs):
            (ok if good else bad)(line)
    if not a.no_correct and "falcon" in sets:
        cli_test(a.falcon, a.work, sets["falcon"][0], sets["falcon"][1], "gain-on-x")
    for cdir, _ in sets.values():
        shutil.rmtree(cdir)
    print("%d twins, %.0f s" % (len(names), time.time() - start))
    print("%d passed, %d failed" % (counts["passed"], counts["failed"]))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
