#!/usr/bin/env python3
"""What an exported case set exercises: one count per feature, read from
the set's own files (case.json, the inputs, the initial state).

    coverage.py SET [SET ...]            a markdown table, one column per set
    coverage.py SET --require            exit 1 naming every feature no case has

A feature no case exercises is a bug a wrong kernel can hide behind: the
grader cannot fail what it never looks at (docs/cases.md, "Coverage").
"""
import json
import os
import sys

import numpy as np

VARIANTS = ("falcon1", "falcon2", "falcon3", "falcon1a", "falcon2a", "falcon3a")
PHIS = ("identity", "relu", "elu1", "l2norm")
DECAYS = ("none", "mild", "random", "strong", "extreme", "reset-slow", "mix")


def _load(d, name):
    return np.load(os.path.join(d, name))


def features(d, c):
    """The features one case exercises, as a set of names."""
    T, B, H, n, m, W, C = (c[k] for k in ("T", "B", "H", "n", "m", "window", "chunk"))
    f = {"variant " + c["variant"], "align " + c["align"], "phi " + c["phi"], "decay " + c["decay"],
         "form " + c["form"]}
    if c["variant"] in ("falcon1", "falcon1a") and c["phi"] == "l2norm":
        f.add("falcon1/1a with l2norm")
    if c["align"] == "same" and c["variant"] == "falcon1":
        f.add("falcon1 same-step (gated delta rule)")
    f.add("T = 0" if T == 0 else "T = 1" if T == 1 else "T < C" if T < C else
          "C < T < 2C" if T < 2 * C else "T >= 2C")
    if T > 1000:
        f.add("T > 1000")
    if T > 0 and T % C == 0:
        f.add("T a multiple of C")
    if B > 1:
        f.add("B > 1")
    if H > 1:
        f.add("H > 1")
    if n != m:
        f.add("n != m")
    if W > 1 and W > T > 0:
        f.add("window longer than T")
    if c.get("seqs"):
        f.add("packed batch (cu_seqlens)")
        lengths = np.diff(c["cu_seqlens"])
        if np.any(lengths == 0):
            f.add("packed sequence of 0 steps")
        if np.any(lengths == 1):
            f.add("packed sequence of 1 step")
    if c.get("qk_heads", H) < H:
        f.add("grouped heads " + c["head_map"])
    if c.get("invariance"):
        f.add("batch invariance group")
    st = os.path.join(d, c["state_in"])
    S0 = _load(st, "S.npy")
    if np.any(S0 != 0):
        f.add("carried memory")
        heads = S0.reshape(S0.shape[0] * S0.shape[1], -1)
        if len(heads) > 1 and any(np.array_equal(heads[0], heads[i]) for i in range(1, len(heads))):
            f.add("carried memory repeated across heads")
        elif B > 1:
            f.add("carried memory differing per batch row")
        if np.max(np.abs(S0)) > 2.0 ** 15:
            f.add("large carried memory")
        if T == 0:
            f.add("T = 0 from a carried state")
    if np.any(_load(st, "has_prev.npy") != 0):
        f.add("carried previous key")
    if np.any(_load(st, "hist_len.npy") != 0):
        f.add("carried window history")
    if c["align"] == "prefix" and not np.any(_load(st, "has_prev.npy") != 0) and T > 0:
        f.add("prefix first step without an example")
    if T > 0:
        beta = _load(d, c["inputs"]["beta"])
        if np.any(beta == 0):
            f.add("beta = 0")
        if np.any(beta == 2):
            f.add("beta = 2")
        k = _load(d, c["inputs"]["k"]).astype(np.float64)
        if np.any(k == 0):
            f.add("exact zeros in keys")
        tiny = np.finfo(np.float64 if c["precision"] == "fp64" else np.float32).tiny
        if np.any((k != 0) & (np.abs(k) < tiny)):
            f.add("subnormal keys")
        if c["stresses"].find("small keys") >= 0:
            f.add("small keys (x.x near eps)")
    ref = _load(d, c["reference"]["out"]), _load(d, c["reference"]["state"])
    if not any(np.any(r != 0) for r in ref):
        f.add("ALL-ZERO REFERENCE")
    return f


def set_features(path):
    ix = json.load(open(os.path.join(path, "index.json")))
    counts = {}
    for row in ix["cases"]:
        d = os.path.join(path, row["dir"])
        c = json.load(open(os.path.join(d, "case.json")))
        for x in features(d, c):
            counts[x] = counts.get(x, 0) + 1
    return ix, counts


def required(layout):
    """Every feature a set of this layout must exercise."""
    req = ["variant " + v for v in VARIANTS] + ["phi " + p for p in PHIS] + ["decay " + d for d in DECAYS]
    req += ["align prefix", "align same", "falcon1/1a with l2norm", "falcon1 same-step (gated delta rule)",
            "T = 0 from a carried state", "T = 1", "T < C", "C < T < 2C", "T >= 2C", "T > 1000",
            "T a multiple of C", "B > 1", "H > 1", "carried memory", "carried memory differing per batch row",
            "carried previous key", "carried window history", "prefix first step without an example",
            "large carried memory", "beta = 0", "beta = 2", "exact zeros in keys", "subnormal keys", "small keys (x.x near eps)",
            "window longer than T", "batch invariance group"]
    if layout != "ggml":  # ggml_gated_delta_net has square memories, no cu_seqlens, no head mapping
        req += ["n != m", "packed batch (cu_seqlens)", "packed sequence of 0 steps", "packed sequence of 1 step",
                "grouped heads interleaved", "grouped heads tiled"]
    return req


def main(argv):
    require = "--require" in argv
    paths = [a for a in argv if a != "--require"]
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    sets = [set_features(p) for p in paths]
    bad = []
    if require:
        for p, (ix, counts) in zip(paths, sets):
            missing = [x for x in required(ix["layout"]) if not counts.get(x)]
            if counts.get("ALL-ZERO REFERENCE"):
                missing.append("no all-zero reference (%d cases have one)" % counts["ALL-ZERO REFERENCE"])
            for x in missing:
                bad.append("%s: no case exercises '%s'" % (p, x))
        for line in bad:
            print(line)
        if not bad:
            print("coverage: every required feature is exercised in %s" % ", ".join(paths))
        return 1 if bad else 0
    names = sorted(set().union(*(c for _, c in sets)))
    head = ["%s %s" % (ix["profile"], ix["layout"]) for ix, _ in sets]
    print("| feature | " + " | ".join(head) + " |")
    print("|---|" + "---|" * len(head))
    print("| cases | " + " | ".join(str(ix["count"]) for ix, _ in sets) + " |")
    for x in names:
        print("| %s | %s |" % (x, " | ".join(str(c.get(x, 0)) for _, c in sets)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
