#!/usr/bin/env python3
"""An outside implementation of Falcon, written plainly in numpy, graded by
`falcon check`. Use it as the model for wiring your own kernel to the suite.

    falcon cases export cases --profile quick
    python3 examples/numpy_falcon.py cases results --dtype float32
    falcon check cases --results results --precision fp32

It implements Falcon-1, Falcon-1A, Falcon-3 and Falcon-3A in the recurrent
form (step by step, from the math; the library is not called) and computes
everything in the chosen dtype. Cases of the other variants are declared
skipped in RESULTS/manifest.json, with the reason. Cases of every form are
run: the forms compute the same recurrence, only their thresholds differ.

One step of a head, state S (m x n):
    Sbar = alpha_t * S                           (decay first; alpha = 1 without decay)
    the step's example (x, y): prefix alignment (phi(k_{t-1}), v_t), same (phi(k_t), v_t);
      under prefix, the first step of a fresh state (no previous key) has none
    window E_t: the last W examples, including those carried in the state
    Falcon-1/3:   S = Sbar + eta * SUM_{E_t} (y - Sbar x) x^T   eta = beta / (eps + SUM_{E_t} x.x)
    Falcon-1A/3A: S = Sbar + eta * SUM_{E_t} y x^T
    read: o_t = scale * S phi(q_t)               (scale = 1 in the library's layout)
(Falcon-1/1A are Falcon-3/3A with W = 1.)

--bug NAME runs a deliberately wrong twin, to see that `falcon check` catches it:
    same-step          always learn (phi(k_t), v_t), ignoring prefix alignment
    state-fp16         keep the state S in float16 between steps
    decay-after-write  apply the decay after the write instead of before
"""
import argparse
import json
import os
import sys
from collections import deque

import numpy as np

try:
    import falcon  # the suite's python module, for load_case / write_result
except ImportError:  # running from a source tree without installing it
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))
    import falcon

SUPPORTED = {"falcon1": (True, False), "falcon3": (True, True),  # variant: (regression, window)
             "falcon1a": (False, False), "falcon3a": (False, True)}
BUGS = ("same-step", "state-fp16", "decay-after-write")


def phi_map(x, phi, dt):
    """The feature map on a key or query, in dtype dt."""
    x = x.astype(dt)
    if phi == "identity":
        return x
    if phi == "relu":
        return np.maximum(x, dt(0))
    if phi == "elu1":
        return np.where(x > 0, x + dt(1), np.exp(np.minimum(x, dt(0))))
    if phi == "l2norm":
        nrm = np.sqrt(np.dot(x, x))
        return x / nrm if nrm > 0 else np.zeros_like(x)
    raise ValueError("unknown phi %r" % phi)


def run_head(q, k, v, beta, alpha, S0, prev_key, hist, *, regression, window, align, phi,
             eps, scale, dt, bug=None):
    """One sequence. q, k [T,n]; v [T,m]; beta, alpha [T] (alpha None: no
    decay); S0 [m,n]; prev_key [n] or None; hist: the carried examples, a
    list of (raw key, value), oldest first. Returns out [T,m], S [m,n]."""
    T, m = v.shape
    S = S0.astype(dt)
    store = np.float16 if bug == "state-fp16" else dt
    S = S.astype(store).astype(dt)
    eps = dt(eps)
    scale = dt(scale)
    examples = deque(((phi_map(hk, phi, dt), hv.astype(dt)) for hk, hv in hist), maxlen=window)
    prev = prev_key
    same = align == "same" or bug == "same-step"
    out = np.empty((T, m), dtype=dt)
    for t in range(T):
        if alpha is not None and bug != "decay-after-write":
            S = dt(alpha[t]) * S                      # forgetting first: Sbar
        raw = k[t] if same else prev
        prev = k[t]
        if raw is not None:                           # this step reveals an example
            examples.append((phi_map(raw, phi, dt), v[t].astype(dt)))
            X = np.stack([x for x, _ in examples])    # [w, n]
            Y = np.stack([y for _, y in examples])    # [w, m]
            eta = dt(beta[t]) / (eps + np.sum(X * X, dtype=dt))
            # every residual against Sbar, before any of the window's writes lands
            R = (Y - X @ S.T) if regression else Y    # [w, m]
            S = S + (eta * R).T @ X
        if alpha is not None and bug == "decay-after-write":
            S = dt(alpha[t]) * S
        S = S.astype(store).astype(dt)
        out[t] = scale * (S @ phi_map(q[t], phi, dt))
    return out, S.astype(store)


def decays(case):
    """alpha [B,T,H] or None. A case gives either alpha or its log g."""
    if case.alpha is not None:
        return case.alpha
    if getattr(case, "g", None) is not None:
        return np.exp(case.g.astype(np.float64))
    return None


def run_case(case, dt, bug=None):
    """Every head of one case. Returns (out, state) in the case's layout."""
    regression, has_window = SUPPORTED[case.variant]
    W = int(case.window) if has_window else 1
    st = case.state_in                                 # the carried state, library layout
    q, k, v, beta = case.q, case.k, case.v, case.beta   # [B,T,H,n] ... in every layout
    alpha = decays(case)
    B, T, H, n = q.shape
    m = v.shape[-1]
    transposed = case.layout == "fla"                  # fla keeps S^T: [B,H,K,V]; ggml as falcon
    out = np.empty((B, T, H, m), dtype=dt)
    state = None
    for b in range(B):
        for h in range(H):
            head = b * H + h
            prev = st["prev_key"][head] if st["has_prev"][head] else None
            hist = [(st["hist_k"][head, i], st["hist_v"][head, i])
                    for i in range(int(st["hist_len"][head]))]
            o, S = run_head(q[b, :, h], k[b, :, h], v[b, :, h], beta[b, :, h],
                            None if alpha is None else alpha[b, :, h], st["S"][head], prev, hist,
                            regression=regression, window=W, align=case.align, phi=case.phi,
                            eps=case.eps, scale=getattr(case, "scale", 1.0), dt=dt, bug=bug)
            out[b, :, h] = o
            if state is None:
                state = np.empty((B, H, n, m) if transposed else (B, H, m, n), dtype=S.dtype)
            state[b, h] = S.T if transposed else S
    return out, state


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", help="an exported case set (falcon cases export)")
    ap.add_argument("results", help="where to write <name>/out.npy, state.npy and manifest.json")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                    help="the arithmetic (and the results' dtype)")
    ap.add_argument("--bug", choices=BUGS, help="run a deliberately wrong twin")
    ap.add_argument("--only", default="", help="comma-separated case names to run (default all)")
    a = ap.parse_args(argv)
    dt = np.dtype(a.dtype).type
    with open(os.path.join(a.cases, "index.json")) as f:
        index = json.load(f)
    only = set(filter(None, a.only.split(",")))
    skip, ran = {}, 0
    for entry in index["cases"]:
        name = entry["name"]
        if only and name not in only:
            continue
        if entry["variant"] not in SUPPORTED:
            skip[name] = "numpy_falcon.py implements falcon1, falcon1a, falcon3, falcon3a; not %s" % (
                entry["variant"])
            continue
        case = falcon.load_case(os.path.join(a.cases, entry.get("dir", name)))
        if case.layout not in ("falcon", "fla", "ggml"):
            skip[name] = "numpy_falcon.py does not know the layout %s" % case.layout
            continue
        out, state = run_case(case, dt, a.bug)
        falcon.write_result(a.results, name, out, state)
        ran += 1
    falcon.write_manifest(a.results, skip)
    print("numpy_falcon: %d cases computed in %s%s, %d skipped (manifest.json)" % (
        ran, a.dtype, " with bug " + a.bug if a.bug else "", len(skip)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
