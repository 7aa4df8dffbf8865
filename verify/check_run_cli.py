#!/usr/bin/env python3
"""Run the falcon CLI as the implementation under test on every case of an
exported set: for each case, `falcon run` with the case's configuration,
its inputs and its initial state (the checkpoint), writing
RDIR/<case>/out.npy and state.npy for `falcon check`. A packed or grouped
case, which no `falcon run` option expresses, runs through the library's
falcon_run instead (run_library). With --grad, on a set
exported with --grad, also `falcon grad` with the case's cotangents
(dO.npy, dS_T.npy): the gradients the case has a reference for
(case.json "gradients"), RDIR/<case>/dq.npy and so on.

  check_run_cli.py FALCON CASES RDIR [--backend B] [--precision fp32|fp64] [--grad]
"""
import json
import os
import shutil
import subprocess
import sys


def run_grad(a, c, d, out, common):
    """falcon grad into a scratch folder, then the case's gradients moved
    beside out.npy (falcon grad writes dprev_key and the history's
    gradients for any checkpoint, a fresh state's too: only the ones the
    case has a reference for are results)."""
    scratch = out + ".grad"
    args = [a.falcon, "grad"] + common + ["--dO", os.path.join(d, c["cotangents"]["dO"]),
                                          "--dS", os.path.join(d, c["cotangents"]["dS_T"]), "--out", scratch]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        sys.stderr.write("%s: falcon grad failed: %s" % (c["name"], r.stderr))
        return 1
    for g in c["gradients"].values():
        os.replace(os.path.join(scratch, g["result"]), os.path.join(out, g["result"]))
    shutil.rmtree(scratch)
    return 0


_SANITIZED = {}


def sanitized(lib):
    """Whether lib links AddressSanitizer's runtime (a `make sanitize`
    build): python cannot load it (ASan must come first), so such a run's
    packed and grouped cases go through the package's own library (the
    source tree's build/) instead; the sanitized library's own tests cover
    the lowering."""
    if lib not in _SANITIZED:
        with open(lib, "rb") as f:
            _SANITIZED[lib] = b"libasan.so" in f.read()
    return _SANITIZED[lib]


def run_library(a, c, d, out):
    """A packed or grouped case (docs/cases.md, "Packed batches and grouped
    heads"), which no `falcon run` option expresses: the same call through
    the library's falcon_run (the Python binding of the libfalcon beside
    the falcon binary), its outputs and final memory written as `falcon run`
    writes them (the library's layout, the run's precision)."""
    import numpy as np
    lib = os.path.join(os.path.dirname(os.path.abspath(a.falcon)), "libfalcon.so")
    if os.path.exists(lib) and not sanitized(lib):
        os.environ.setdefault("FALCON_LIB", lib)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))
    import falcon_suite

    def load(key):
        f = c["inputs"].get(key)
        return np.load(os.path.join(d, f)) if f else None

    try:
        o, S = falcon_suite.run(
            load("q"), load("k"), load("v"), load("beta"), load("alpha"), load("gain"), variant=c["variant"],
            form=c["form"], backend=a.backend, precision=a.precision, align=c["align"], phi=c["phi"], eps=c["eps"],
            window=c["window"], chunk=c["chunk"], threads=1, state=falcon_suite.State.load(os.path.join(d, c["state_in"])),
            cu_seqlens=load("cu_seqlens"), qk_heads=c.get("qk_heads"), head_map=c.get("head_map", "interleaved"))
    except falcon_suite.FalconError as e:
        sys.stderr.write("%s: falcon_run failed: %s\n" % (c["name"], e))
        return 1
    np.save(os.path.join(out, "out.npy"), o)
    np.save(os.path.join(out, "state.npy"), S.astype(o.dtype))
    if not (a.grad and "gradients" in c):
        return 0
    cot = c["cotangents"]
    g = falcon_suite.grad(
        load("q"), load("k"), load("v"), load("beta"), load("alpha"), load("gain"),
        dO=np.load(os.path.join(d, cot["dO"])), dS=np.load(os.path.join(d, cot["dS_T"])), variant=c["variant"],
        form=c["form"], backend=a.backend, precision=a.precision, align=c["align"], phi=c["phi"], eps=c["eps"],
        window=c["window"], chunk=c["chunk"], threads=1, state=falcon_suite.State.load(os.path.join(d, c["state_in"])),
        cu_seqlens=load("cu_seqlens"), qk_heads=c.get("qk_heads"), head_map=c.get("head_map", "interleaved"))
    for name, e in c["gradients"].items():
        np.save(os.path.join(out, e["result"]), g[name].reshape(e["shape"]))
    return 0


def main(argv):
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("falcon")
    p.add_argument("cases")
    p.add_argument("results")
    p.add_argument("--backend", default="auto")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--grad", action="store_true")
    a = p.parse_args(argv)
    with open(os.path.join(a.cases, "index.json")) as f:
        index = json.load(f)
    failed = 0
    for row in index["cases"]:
        d = os.path.join(a.cases, row["dir"])
        with open(os.path.join(d, "case.json")) as f:
            c = json.load(f)
        out = os.path.join(a.results, c["name"])
        os.makedirs(out, exist_ok=True)
        if "seqs" in c or "qk_heads" in c:
            failed += run_library(a, c, d, out)
            continue
        common = ["--variant", c["variant"], "--form", c["form"], "--align", c["align"],
                  "--phi", c["phi"], "--eps", repr(c["eps"]), "--window", str(c["window"]),
                  "--chunk", str(c["chunk"]), "--backend", a.backend, "--precision", a.precision,
                  "--threads", "1", "--checkpoint-in", os.path.join(d, c["state_in"])]
        for name, file in c["inputs"].items():
            if file:
                common += ["--" + name, os.path.join(d, file)]
        args = [a.falcon, "run"] + common + ["--out", os.path.join(out, "out.npy"),
                                             "--state-out", os.path.join(out, "state.npy")]
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode:
            failed += 1
            sys.stderr.write("%s: falcon run failed: %s" % (c["name"], r.stderr))
        if a.grad and "gradients" in c:
            failed += run_grad(a, c, d, out, common)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
