#!/usr/bin/env python3
"""Falcon-1 in the chunk form, in PyTorch, in the layout of the PyTorch
linear-attention libraries (fla): q, k [B,T,H,K], v [B,T,H,V], beta and the
decay [B,T,H], state h [B,H,K,V] (the transpose of the library's S [m,n]),
reads o_t = scale * phi(q_t)^T h_t. Graded by `falcon check` like any kernel:

    falcon cases export cases-fla --profile quick --layout fla
    python3 examples/torch_falcon_chunk.py cases-fla results-fla
    falcon check cases-fla --results results-fla --precision fp32

It computes in float32 (decay exponents in float64) and also takes cases in
the library's own layout and in ggml's (state [B,H,m,n]), packed batches
(cu_seqlens: each sequence from its own state row) and grouped q/k heads. Falcon-1A (no
solve) comes for free; other variants are declared skipped in
RESULTS/manifest.json. Exits 77 with "skipped: torch not installed" where
torch is missing.

The chunk form (one chunk of L steps starting from state h0; b_i = SUM_{r<=i}
log alpha_r inside the chunk; D_ij = exp(b_i - b_j) for j <= i, else 0):
    x_j   = phi(k_{j-1}) (prefix) or phi(k_j) (same); a step without example has x_j = 0
    eta_j = beta_j / (eps + x_j.x_j)
    Falcon-1:  (I + A) R = eta * (Y - exp(b) * X h0),  A = eta * strict_lower(D * X X^T)
    Falcon-1A: R = eta * Y
    O     = scale * ((Q X^T * D) R + exp(b) * Q h0)
    h_L   = exp(b_L) h0 + (X * exp(b_L - b))^T R
"""
import argparse
import json
import os
import sys

import numpy as np

try:
    import torch
except ImportError:
    torch = None

try:
    import falcon_suite
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))
    import falcon_suite

SUPPORTED = ("falcon1", "falcon1a")
# Wrong twins of the backward pass (--bug), each a bug reported in the
# field's kernels, which `falcon check` must fail on a --grad set:
BUGS = {"dg-first-step": "the decay's gradient misses each sequence's first step",
        "grads-unwritten-last-sequence": "the last packed sequence's input gradients left unwritten (zeros)"}


def phi_map(x, phi):
    if phi == "identity":
        return x
    if phi == "relu":  # relu'(0) = 0, the library's convention (docs/math.md 12); clamp's is 1
        return torch.where(x > 0, x, torch.zeros((), dtype=x.dtype))
    if phi == "elu1":
        return torch.where(x > 0, x + 1, torch.exp(torch.clamp(x, max=0)))
    if phi == "l2norm":
        # x / ||x||, 0 for 0. x is first scaled exactly by a power of two near
        # 1 / max|x| (in two factors: one could overflow), so that the sum of
        # squares neither underflows (subnormal keys) nor overflows.
        big = x.abs().amax(dim=-1, keepdim=True)
        _, e = torch.frexp(big)
        half = -torch.div(e, 2, rounding_mode="floor")
        y = x * torch.pow(2.0, half.to(x.dtype)) * torch.pow(2.0, (-e - half).to(x.dtype))
        nrm = torch.linalg.vector_norm(y, dim=-1, keepdim=True)
        return torch.where(big > 0, y / torch.where(nrm > 0, nrm, torch.ones_like(nrm)), torch.zeros_like(x))
    raise ValueError("unknown phi %r" % phi)


def chunk_falcon1(q, k, v, beta, log_alpha, h0, prev_key, has_prev, *, regression=True,
                  align="prefix", phi="identity", eps=1e-6, scale=1.0, chunk=64):
    """q, k [B,T,H,K]; v [B,T,H,V]; beta [B,T,H]; log_alpha [B,T,H] float64 or
    None; h0 [B,H,K,V]; prev_key [B,H,K]; has_prev [B,H] bool.
    Returns o [B,T,H,V], h [B,H,K,V] in q's dtype."""
    dt = q.dtype
    B, T, H, K = q.shape
    if T == 0:  # no steps: no reads, the state as it was
        return torch.empty(B, 0, H, v.shape[-1], dtype=dt), h0.to(dt).clone()
    q, k, v, beta = (t.transpose(1, 2) for t in (q, k, v, beta))  # [B,H,T,*]
    if align == "same":
        xr = k
        valid = torch.ones(B, H, T, dtype=torch.bool)
    else:
        xr = torch.cat([prev_key.unsqueeze(2).to(dt), k[:, :, :-1]], dim=2)
        valid = torch.ones(B, H, T, dtype=torch.bool)
        valid[:, :, 0] = has_prev
    x = phi_map(xr, phi) * valid.unsqueeze(-1).to(dt)
    qp = phi_map(q, phi)
    eta = torch.where(valid, beta / (torch.tensor(eps, dtype=dt) + (x * x).sum(-1)),
                      torch.zeros((), dtype=dt))
    la = None if log_alpha is None else log_alpha.transpose(1, 2).to(torch.float64)
    h = h0.to(dt).clone()
    out = torch.empty(B, H, T, v.shape[-1], dtype=dt)
    for s in range(0, T, chunk):
        e = min(s + chunk, T)
        L = e - s
        xc, qc, yc, ec = x[:, :, s:e], qp[:, :, s:e], v[:, :, s:e], eta[:, :, s:e]
        if la is None:
            b = torch.zeros(B, H, L, dtype=torch.float64)
        else:
            b = torch.cumsum(la[:, :, s:e], dim=-1)
        diff = b.unsqueeze(-1) - b.unsqueeze(-2)                       # b_i - b_j
        lower = torch.ones(L, L, dtype=torch.bool).tril()
        D = torch.where(lower, torch.exp(torch.where(lower, diff, torch.zeros((), dtype=torch.float64))),
                        torch.zeros((), dtype=torch.float64)).to(dt)   # never exp of a positive
        eb = torch.exp(b).to(dt).unsqueeze(-1)                          # [B,H,L,1]
        if regression:
            rhs = ec.unsqueeze(-1) * (yc - eb * (xc @ h))
            A = ec.unsqueeze(-1) * (D * (xc @ xc.transpose(-1, -2))).tril(-1)
            I = torch.eye(L, dtype=dt)
            R = torch.linalg.solve_triangular(I + A, rhs, upper=False, unitriangular=True)
        else:
            R = ec.unsqueeze(-1) * yc
        out[:, :, s:e] = scale * ((D * (qc @ xc.transpose(-1, -2))) @ R + eb * (qc @ h))
        wL = torch.exp(b[:, :, -1:] - b).to(dt).unsqueeze(-1)           # exp(b_L - b_j)
        h = eb[:, :, -1:] * h + (xc * wL).transpose(-1, -2) @ R
    return out.transpose(1, 2).contiguous(), h


def qk_heads_index(case):
    """The q/k head each value head reads: grouped heads (qk_heads < H)
    interleaved (h // G, fla's num_v_heads) or tiled (h % qk_heads)."""
    H, hq = case.v.shape[2], case.q.shape[2]
    if hq == H:
        return list(range(H))
    return [h % hq if case.head_map == "tiled" else h // (H // hq) for h in range(H)]


def sequences(case):
    """(b, t0, t1, row): the steps [t0, t1) of batch row b from state row
    `row`; a packed case (cu_seqlens) has one per sequence."""
    cu = getattr(case, "cu_seqlens", None)
    if cu is None:
        return [(b, 0, case.T, b) for b in range(case.q.shape[0])]
    return [(0, int(cu[i]), int(cu[i + 1]), i) for i in range(len(cu) - 1)]


def leaves(case):
    """The case's inputs as tensors that autograd differentiates: q, k, v,
    beta in float32; alpha, the initial memory S [rows,H,m,n] and the
    previous keys in float64 (a log of alpha, and the state, as given)."""
    def leaf(a, dt):
        return torch.from_numpy(np.ascontiguousarray(a, dtype=dt)).requires_grad_()
    st, H = case.state_in, case.v.shape[2]
    rows = len(st["S"]) // H
    return dict(q=leaf(case.q, np.float32), k=leaf(case.k, np.float32), v=leaf(case.v, np.float32),
                beta=leaf(case.beta, np.float32), alpha=None if case.alpha is None else leaf(case.alpha, np.float64),
                S=leaf(st["S"].reshape(rows, H, case.m, case.n), np.float64),
                prev=leaf(st["prev_key"].reshape(rows, H, case.n), np.float64),
                has_prev=torch.from_numpy(st["has_prev"].reshape(rows, H)))


def forward(case, x, chunk=None, bug=None):
    """Every sequence of the case from the leaves x. Returns o [B,T,H,V]
    and the final memory in the library's layout [rows,H,m,n] (float32)."""
    f = torch.float32
    idx = qk_heads_index(case)
    q, k = x["q"][:, :, idx], x["k"][:, :, idx]
    if getattr(case, "g", None) is not None:
        log_alpha = torch.from_numpy(case.g.astype(np.float64))
    else:
        log_alpha = None if x["alpha"] is None else torch.log(x["alpha"])
    h0 = x["S"].transpose(-1, -2).to(f)
    outs, states = [], []
    for b, t0, t1, r in sequences(case):
        span = slice(t0, t1)
        la = None if log_alpha is None else log_alpha[b:b + 1, span]
        if bug == "dg-first-step" and la is not None and t1 > t0:  # the first step's decay taken as a constant
            la = torch.cat([la[:, :1].detach(), la[:, 1:]], dim=1)
        o, h = chunk_falcon1(q[b:b + 1, span], k[b:b + 1, span], x["v"][b:b + 1, span], x["beta"][b:b + 1, span],
                             la, h0[r:r + 1], x["prev"][r:r + 1], x["has_prev"][r:r + 1],
                             regression=case.variant == "falcon1", align=case.align, phi=case.phi, eps=case.eps,
                             scale=float(getattr(case, "scale", 1.0)), chunk=int(chunk or case.chunk or 64))
        outs.append((b, span, o))
        states.append(h)
    out = torch.zeros(x["v"].shape, dtype=f)
    for b, span, o in outs:
        out[b:b + 1, span] = o
    return out, torch.cat(states).transpose(-1, -2)


def run_case(case, chunk=None):
    with torch.no_grad():
        out, S = forward(case, leaves(case), chunk)
    state = S.transpose(-1, -2) if case.layout == "fla" else S
    return out.numpy(), state.contiguous().numpy()


def grad_case(case, chunk=None, bug=None):
    """The gradients a --grad case asks for (case.json "gradients"), by
    autograd through the chunk form: of L = <O, dO> + <S_T, dS_T>."""
    x = leaves(case)
    out, S = forward(case, x, chunk, bug)
    loss = (out.double() * torch.from_numpy(case.dO.astype(np.float64))).sum()
    loss = loss + (S.double() * torch.from_numpy(case.dS_T.reshape(S.shape))).sum()
    loss.backward()
    have = {"dq": x["q"], "dk": x["k"], "dv": x["v"], "dbeta": x["beta"], "dalpha": x["alpha"], "dS0": x["S"],
            "dprev_key": x["prev"]}
    grads = {}
    for name, e in case.gradients.items():
        t = have.get(name)
        g = t.grad if t is not None and t.grad is not None else None
        g = np.zeros(e["shape"]) if g is None else g.numpy()  # the window's history: none in Falcon-1/1A
        grads[name] = g.reshape(e["shape"])
    if bug == "grads-unwritten-last-sequence" and getattr(case, "cu_seqlens", None) is not None:
        t0 = int(case.cu_seqlens[-2])  # the last sequence's rows left as they were: zeros
        for name in ("dq", "dk", "dv", "dbeta", "dalpha"):
            if name in grads:
                grads[name][:, t0:] = 0
    return grads


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases")
    ap.add_argument("results")
    ap.add_argument("--chunk", type=int, default=0, help="chunk size (default: the case's)")
    ap.add_argument("--bug", choices=BUGS, help="a wrong twin of the gradients (BUGS)")
    a = ap.parse_args(argv)
    if torch is None:
        print("skipped: torch not installed")
        return 77
    torch.set_num_threads(1)
    with open(os.path.join(a.cases, "index.json")) as f:
        index = json.load(f)
    skip, ran = {}, 0
    for entry in index["cases"]:
        name = entry["name"]
        if entry["variant"] not in SUPPORTED:
            skip[name] = "torch_falcon_chunk.py implements falcon1 and falcon1a only"
            continue
        case = falcon_suite.load_case(os.path.join(a.cases, entry.get("dir", name)))
        if case.layout not in ("fla", "falcon", "ggml"):
            skip[name] = "torch_falcon_chunk.py does not know the layout %s" % case.layout
            continue
        if getattr(case, "gradients", None) and case.alpha is not None and float(np.min(case.alpha, initial=1.0)) < 1e-30:
            skip[name] = ("torch_falcon_chunk.py: float32 autograd through exp(cumsum log alpha) cannot resolve "
                          "the decay's gradient at alpha near the smallest normal number")
            continue
        out, state = run_case(case, a.chunk)
        falcon_suite.write_result(a.results, name, out, state)
        if getattr(case, "gradients", None):  # a --grad set (falcon layout)
            for g, x in grad_case(case, a.chunk, a.bug).items():
                np.save(os.path.join(a.results, name, case.gradients[g]["result"]), x.astype(np.float32))
        ran += 1
    falcon_suite.write_manifest(a.results, skip)
    print("torch_falcon_chunk: %d cases computed in float32, %d skipped (manifest.json)"
          % (ran, len(skip)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
