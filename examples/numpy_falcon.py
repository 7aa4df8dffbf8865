#!/usr/bin/env python3
"""An outside implementation of Falcon, written plainly in numpy, graded by
`falcon check`. Use it as the model for wiring your own kernel to the suite.

    falcon cases export cases --profile quick
    python3 examples/numpy_falcon.py cases results --dtype float32
    falcon check cases --results results --precision fp32

It implements every variant (Falcon-1, 2, 3, 1A, 2A, 3A) in the recurrent
form (step by step, from the math; the library is not called) and computes
everything in the chosen dtype. Cases of every form are run: the forms
compute the same recurrence, only their thresholds differ.

One step of a head, state S (m x n):
    Sbar = alpha_t * S                           (decay first; alpha = 1 without decay)
    the step's example (x, y): prefix alignment (phi(k_{t-1}), v_t), same (phi(k_t), v_t);
      under prefix, the first step of a fresh state (no previous key) has none
    window E_t: the last W examples, including those carried in the state
    write direction z = x, Falcon-2/2A: z = g_t * x (the step's per-column gains)
    Falcon-1/2/3:    S = Sbar + eta * SUM_{E_t} (y - Sbar x) z^T   eta = beta / (eps + SUM_{E_t} x.z)
    Falcon-1A/2A/3A: S = Sbar + eta * SUM_{E_t} y z^T
    read: o_t = scale * S phi(q_t)               (scale = 1 in the library's layout)
(Falcon-1/1A are Falcon-3/3A with W = 1; Falcon-2/2A have W = 1.)

--dtype float16 computes in numpy's half arithmetic; grade it with
`falcon check --precision fp16`. Half has 10 bits and a largest finite
number of 65504: cases whose values leave that range, or whose normaliser
floor eps (1e-6 by default, a subnormal number in half, with 4 bits) is
not negligible beside x.x, are declared skipped with the reason.

--bug NAME runs a deliberately wrong twin (examples/falcon_twins.py, which
lists them), to see that `falcon check` catches it.
"""
import argparse
import json
import os
import sys
from collections import deque
from types import SimpleNamespace

import numpy as np

try:
    import falcon_suite  # the suite's python module, for load_case / write_result
except ImportError:  # running from a source tree without installing it
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))
    import falcon_suite

# variant: (regression, window); Falcon-2/2A are the ones with gains
SUPPORTED = {"falcon1": (True, False), "falcon2": (True, False), "falcon3": (True, True),
             "falcon1a": (False, False), "falcon2a": (False, False), "falcon3a": (False, True)}
GAINS = ("falcon2", "falcon2a")
HALF_MAX = 65504.0


class Falcon:
    """The recurrence of one case, in dtype dt. Each method is one piece of
    the step above; a wrong twin (falcon_twins.py) overrides one of them."""

    def __init__(self, case, dt):
        self.case = case
        self.dt = dt
        self.regression, has_window = SUPPORTED[case.variant]
        self.W = int(case.window) if has_window else 1
        self.same = case.align == "same"
        self.eps = dt(case.eps)
        self.scale = dt(getattr(case, "scale", 1.0))

    # ---- the feature map, along the last axis ----
    def phi(self, x):
        return getattr(self, self.case.phi.replace("identity", "ident"))(x.astype(self.dt))

    def ident(self, x):
        return x

    def relu(self, x):
        return np.maximum(x, self.dt(0))

    def elu1(self, x):
        return np.where(x > 0, x + self.dt(1), np.exp(np.minimum(x, self.dt(0))))

    def l2norm(self, x):
        """x / ||x||, 0 for x = 0. x is first scaled by the power of two
        nearest above its largest magnitude (exact), so that x.x neither
        underflows (subnormal keys) nor overflows (huge ones)."""
        big = np.max(np.abs(x), axis=-1, keepdims=True)
        _, e = np.frexp(big)
        y = np.ldexp(x, -e)
        nrm = np.sqrt(np.sum(y * y, axis=-1, keepdims=True, dtype=self.dt))
        return np.where(big > 0, y / np.where(nrm > 0, nrm, self.dt(1)), self.dt(0))

    # ---- one head's carried state ----
    def carried(self, st, b, h):
        """The initial state of head (b, h) from the checkpoint (library layout):
        S [m,n], the previous key's features (None: no previous key) and the
        window's examples [(x, y)], oldest first."""
        head = b * self.case.H + h
        S = st["S"][head].astype(self.dt)
        prev = self.phi(st["prev_key"][head]) if st["has_prev"][head] else None
        hist = [(self.phi(st["hist_k"][head, i]), st["hist_v"][head, i].astype(self.dt))
                for i in range(int(st["hist_len"][head]))]
        return S, prev, hist

    # ---- one step ----
    def decay(self, S, hd, t):
        return S if hd.alpha is None else hd.alpha[t] * S

    def example_key(self, hd, t):
        """The features x of step t's example (None: the step has none);
        remembers k_t for the next step."""
        x = hd.fk[t] if self.same else hd.prev
        hd.prev = hd.fk[t]
        return x

    def examples(self, hd):
        X = np.stack([x for x, _ in hd.window])      # [w, n]
        Y = np.stack([y for _, y in hd.window])      # [w, m]
        return X, Y

    def directions(self, X, hd, t):
        return X if hd.gain is None else hd.gain[t] * X

    def eta(self, beta, X, Z):
        return beta / (self.eps + np.sum(X * Z, dtype=self.dt))

    def write(self, S, X, Y, Z, eta):
        # every residual against Sbar, before any of the window's writes lands
        R = (Y - X @ S.T) if self.regression else Y  # [w, m]
        return S + (eta * R).T @ Z

    def learn(self, S, hd, t):
        X, Y = self.examples(hd)
        Z = self.directions(X, hd, t)
        if not np.any(Z):  # the write eta * (...) z^T is exactly 0; eta = beta / eps may not fit the dtype
            return S
        return self.write(S, X, Y, Z, self.eta(hd.beta[t], X, Z))

    def keep(self, S, hd, t):
        """The memory as stored between steps (a kernel with a narrower
        state rounds it here)."""
        return S

    def read(self, S, fq):
        return self.scale * (S @ fq)

    def step(self, hd, t):
        """Step t (0-based) of a head: forget, learn, read. Returns o_t."""
        S = self.decay(hd.S, hd, t)
        x = self.example_key(hd, t)
        if x is not None:
            hd.window.append((x, hd.v[t]))
            S = self.learn(S, hd, t)
        hd.S = self.keep(S, hd, t)
        return self.read(hd.S, hd.fq[t])

    def run_head(self, hd):
        """hd: fq, fk [T,n] (features), v [T,m], beta [T], alpha [T] or None,
        gain [T,n] or None, S, prev, window. Returns out [T,m]; hd.S is the
        final memory."""
        T, m = hd.v.shape
        out = np.empty((T, m), dtype=self.dt)
        for t in range(T):
            out[t] = self.step(hd, t)
        return out

    # ---- a whole case ----
    def features(self, c):
        """phi of the queries and keys [B,T,H_qk,n]."""
        return self.phi(c.q), self.phi(c.k)

    def sequences(self):
        """(b, t0, t1, s): the steps [t0, t1) of batch row b, run from state
        row s. A packed case (cu_seqlens, B = 1) has one per sequence, each
        with its own state row: nothing flows from one into the next."""
        c = self.case
        cu = getattr(c, "cu_seqlens", None)
        if cu is None:
            return [(b, 0, c.T, b) for b in range(c.B)]
        return [(0, int(cu[i]), int(cu[i + 1]), i) for i in range(len(cu) - 1)]

    def qk_head(self, h):
        """The query/key head value head h reads: grouped heads share them,
        interleaved (h // G, each repeated G times) or tiled (h % H_qk)."""
        c = self.case
        hq = getattr(c, "qk_heads", c.H)
        if hq == c.H:
            return h
        return h % hq if c.head_map == "tiled" else h // (c.H // hq)

    def start(self, st, s, h, ended):
        """The initial (S, prev, hist) of head h of state row s; ended: the
        heads' final hd of the sequence before, in a packed case."""
        return self.carried(st, s, h)

    def run(self):
        """Every head of the case. Returns (out, state) in the case's layout."""
        c, dt = self.case, self.dt
        fq, fk = self.features(c)
        v = c.v.astype(dt)
        beta = c.beta.astype(dt)
        alpha = decays(c)
        alpha = None if alpha is None else alpha.astype(dt)
        gain = c.gain.astype(dt) if c.variant in GAINS else None
        B, T, H, m = v.shape
        n = c.q.shape[-1]
        out = np.zeros((B, T, H, m), dtype=dt)
        states, ended = [], {}
        seqs = self.sequences()
        for b, t0, t1, s in seqs:
            for h in range(H):
                S, prev, hist = self.start(c.state_in, s, h, ended)
                g, span = self.qk_head(h), slice(t0, t1)
                hd = SimpleNamespace(fq=fq[b, span, g], fk=fk[b, span, g], v=v[b, span, h], beta=beta[b, span, h],
                                     alpha=None if alpha is None else alpha[b, span, h],
                                     gain=None if gain is None else gain[b, span, h], T=t1 - t0,
                                     S=self.keep(S, None, -1), prev=prev, window=deque(hist, maxlen=self.W))
                out[b, span, h] = self.run_head(hd)
                states.append(hd.S)
                ended[h] = hd
        return self.layout(out, np.stack(states).reshape(len(seqs), H, m, n))

    def layout(self, out, state):
        """The library's state [B,H,m,n] in the case's layout: fla keeps S^T
        [B,H,K,V]; ggml's numpy array is the same memory as ours."""
        if self.case.layout == "fla":
            state = np.swapaxes(state, -1, -2)
        return out, np.ascontiguousarray(state)


def decays(case):
    """alpha [B,T,H] or None. A case gives either alpha or its log g."""
    if case.alpha is not None:
        return case.alpha
    if getattr(case, "g", None) is not None:
        return np.exp(case.g.astype(np.float64))
    return None


def twin_class(bug):
    """The class of the wrong twin NAME (falcon_twins.py, beside this file)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import falcon_twins
    return falcon_twins.twin_class(bug)


def run_case(case, dt, bug=None):
    """Every head of one case. Returns (out, state) in the case's layout."""
    return (twin_class(bug) if bug else Falcon)(case, dt).run()


def run_head(q, k, v, beta, alpha, S0, prev_key, hist, *, regression, window, align, phi,
             eps, scale, dt, gain=None):
    """One sequence without a case file (the library's tests use it). q, k
    [T,n]; v [T,m]; beta, alpha [T] (alpha None: no decay); gain [T,n] or
    None; S0 [m,n]; prev_key [n] or None; hist: the carried examples, a list
    of (raw key, value), oldest first. Returns out [T,m], S [m,n]."""
    variant = {(True, False): "falcon1", (True, True): "falcon3",
               (False, False): "falcon1a", (False, True): "falcon3a"}[(regression, window > 1)]
    f = Falcon(SimpleNamespace(variant=variant, window=window, align=align, phi=phi, eps=eps,
                               scale=scale, layout="falcon"), dt)
    hd = SimpleNamespace(fq=f.phi(q), fk=f.phi(k), v=v.astype(dt), beta=beta.astype(dt),
                         alpha=None if alpha is None else alpha.astype(dt),
                         gain=None if gain is None else gain.astype(dt), T=len(v), S=S0.astype(dt),
                         prev=None if prev_key is None else f.phi(prev_key),
                         window=deque(((f.phi(hk), hv.astype(dt)) for hk, hv in hist), maxlen=f.W))
    return f.run_head(hd), hd.S


def half_unfit(case):
    """Why half arithmetic cannot compute this case, or None."""
    arrays = [case.q, case.k, case.v, case.state_in["S"], case.state_in["hist_v"], case.state_in["hist_k"]]
    big = max(float(np.max(np.abs(a))) if a is not None and a.size else 0.0 for a in arrays)
    if big > HALF_MAX / 4:  # the margin: a step forms sums of a few such values
        return "a value of %.3g: half's largest finite number is 65504" % big
    f = Falcon(case, np.float64)
    x = f.phi(case.k)[:, :, [f.qk_head(h) for h in range(case.H)]]  # the features per value head, and z = g * x
    z = x if case.variant not in GAINS or case.gain is None else case.gain.astype(np.float64) * x
    xz = np.sum(x * z, axis=-1)
    xz = xz[xz > 0]  # a zero direction writes nothing (Falcon.learn)
    if case.T and xz.size and float(np.min(xz)) < 1e3 * case.eps:
        return ("small keys (x.z within 1000 eps): eps = %.3g is subnormal in half (4 bits), "
                "so the normaliser's floor cannot be represented" % case.eps)
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", help="an exported case set (falcon cases export)")
    ap.add_argument("results", help="where to write <name>/out.npy, state.npy and manifest.json")
    ap.add_argument("--dtype", choices=("float64", "float32", "float16"), default="float64",
                    help="the arithmetic (and the results' dtype)")
    ap.add_argument("--bug", metavar="NAME", help="run a deliberately wrong twin (falcon_twins.py)")
    ap.add_argument("--only", default="",
                    help="comma-separated case names to run; the others are declared skipped")
    a = ap.parse_args(argv)
    dt = np.dtype(a.dtype).type
    if a.bug:
        try:
            twin_class(a.bug)
        except KeyError:
            ap.error("--bug: no twin %r (examples/falcon_twins.py lists them)" % a.bug)
    with open(os.path.join(a.cases, "index.json")) as f:
        index = json.load(f)
    only = set(filter(None, a.only.split(",")))
    unknown = only - {e["name"] for e in index["cases"]}
    if unknown:
        ap.error("--only: no case %s in %s" % (", ".join(sorted(unknown)), a.cases))
    skip, ran = {}, 0
    for entry in index["cases"]:
        name = entry["name"]
        if only and name not in only:
            skip[name] = "not selected (--only)"
            continue
        case = falcon_suite.load_case(os.path.join(a.cases, entry.get("dir", name)))
        if case.layout not in ("falcon", "fla", "ggml"):
            skip[name] = "numpy_falcon.py does not know the layout %s" % case.layout
            continue
        why = half_unfit(case) if dt is np.float16 else None
        if why:
            skip[name] = "float16: " + why
            continue
        out, state = run_case(case, dt, a.bug)
        falcon_suite.write_result(a.results, name, out, state)
        ran += 1
    falcon_suite.write_manifest(a.results, skip)
    print("numpy_falcon: %d cases computed in %s%s, %d skipped (manifest.json)" % (
        ran, a.dtype, " with bug " + a.bug if a.bug else "", len(skip)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
