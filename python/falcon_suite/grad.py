"""Gradients through libfalcon's backward pass (falcon_backward, docs/math.md
section 12), and a torch.autograd.Function over it for CPU tensors.

    g = falcon_suite.grad(q, k, v, beta, alpha, dO=dO, dS=dS, variant="falcon1")
    g["dq"], g["dk"], g["dv"], g["dbeta"], g["dalpha"], g["dS0"]

    out, S = falcon_suite.torch_run(q, k, v, beta, alpha, variant="falcon1")
    (out.square().sum() + S.sum()).backward()   # q.grad, k.grad, ... filled
"""
import ctypes

import numpy as np

from . import _lib
from .api import _DTYPES, _is_torch, _arr, _ptr, _state_for, call_arrays, make_config, make_inputs

__all__ = ["grad", "torch_run"]


class Grads(ctypes.Structure):
    """struct falcon_grads (include/falcon.h)."""

    _fields_ = [(name, ctypes.c_void_p) for name in
                ("dq", "dk", "dv", "dbeta", "dalpha", "dgain", "dS0", "dprev_key", "dhist_k", "dhist_v")]


def _declare(L):
    if getattr(L, "_falcon_grad_declared", False):
        return
    L.falcon_backward.argtypes = [ctypes.POINTER(_lib.Config), ctypes.POINTER(_lib.Inputs), ctypes.c_void_p,
                                  ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(Grads)]
    L.falcon_backward.restype = ctypes.c_int
    L._falcon_grad_declared = True


def grad(q, k, v, beta, alpha=None, gain=None, *, dO=None, dS=None, variant="falcon1",
         form="recurrent", backend="auto", precision="fp32", align="prefix", phi="identity",
         eps=1e-6, window=1, chunk="auto", threads=0, state=None, mpfr_bits=256, cu_seqlens=None,
         qk_heads=None, head_map="interleaved"):
    """The gradients of L = <O, dO> + <S_T, dS> for run() of the same arguments.

    dO is shaped as run()'s reads ([T,m] or [B,T,H,m]; None: 0), dS as its
    final memory ([m,n], [B,H,m,n] or, with cu_seqlens, [seqs,H,m,n]; None:
    0). state: None, a memory array or a State (read, not changed).
    cu_seqlens, qk_heads, head_map: the layouts of run(). Returns a dict of
    numpy arrays: dq, dk (q's shape: with grouped heads, the gradient of a
    shared q/k head is the sum over the value heads that read it, in double,
    rounded once), dv, dbeta in the run's precision; dalpha and dgain when
    alpha and gain are given; dS0 (the initial memory's gradient, float64,
    shaped as dS); with a State also dprev_key, dhist_k, dhist_v ([heads,
    ...], float64; heads = seqs*H packed, else B*H).
    """
    L = _lib.lib()
    _declare(L)
    if precision not in _DTYPES:
        raise ValueError("precision must be 'fp32', 'fp64', 'tf32' or 'bf16', not %r" % (precision,))
    dt = _DTYPES[precision]
    sh, arrays = call_arrays(dt, q, k, v, beta, alpha, gain, cu_seqlens=cu_seqlens, qk_heads=qk_heads)
    q, k, v, beta, alpha, gain = arrays
    n, m, heads = sh.dims[3], sh.dims[4], sh.heads
    dO = _arr(dO, dt, "dO", sh.lead + (m,))
    dS = _arr(dS, np.float64, "dS", sh.state_shape)
    cfg = make_config(variant=variant, form=form, backend=backend, precision=precision, align=align,
                      phi=phi, eps=eps, window=window, chunk=chunk, threads=threads, mpfr_bits=mpfr_bits)
    inp = make_inputs(sh, arrays, head_map)
    out = {"dq": np.zeros(q.shape, dt), "dk": np.zeros(q.shape, dt), "dv": np.zeros(v.shape, dt),
           "dbeta": np.zeros(sh.lead, dt), "dS0": np.zeros((heads, m, n))}
    if alpha is not None:
        out["dalpha"] = np.zeros(sh.lead, dt)
    if gain is not None:
        out["dgain"] = np.zeros(sh.lead + (n,), dt)
    carried = state is not None and not isinstance(state, np.ndarray) and hasattr(state, "_h")
    if carried:
        keep = max(cfg.window, 1) - 1
        out.update(dprev_key=np.zeros((heads, n)), dhist_k=np.zeros((heads, keep, n)),
                   dhist_v=np.zeros((heads, keep, m)))
    g = Grads(**{name: _ptr(a) for name, a in out.items()})
    st, own = _state_for(state, cfg, sh)
    try:
        _lib.check_status(L.falcon_backward(ctypes.byref(cfg), ctypes.byref(inp), st._h, _ptr(dO), _ptr(dS),
                                            ctypes.byref(g)), "falcon_backward")
    finally:
        if own is not None:
            own.close()
    out["dS0"] = out["dS0"].reshape(sh.state_shape)
    return out


_INPUTS = ("q", "k", "v", "beta", "alpha", "gain")


def _function():
    """The autograd Function, made on first use (torch may be absent)."""
    import torch

    class FalconFunction(torch.autograd.Function):
        """run() forward, grad() backward. Arguments: the six inputs (alpha,
        gain may be None), the initial memory S0 (or None) and the
        configuration dict; returns (out, S)."""

        @staticmethod
        def forward(ctx, q, k, v, beta, alpha, gain, S0, config):
            from .api import run
            arrays = [None if x is None else x.detach() for x in (q, k, v, beta, alpha, gain)]
            state = None if S0 is None else S0.detach().double().numpy()
            out, S = run(*arrays, state=state, **config)
            ctx.config, ctx.state = config, state
            ctx.save_for_backward(*[x for x in arrays if x is not None])
            ctx.present = [x is not None for x in arrays]
            ctx.S0_dtype = None if S0 is None else S0.dtype
            return out, S

        @staticmethod
        def backward(ctx, dout, dS):
            saved = iter(ctx.saved_tensors)
            arrays = [next(saved) if p else None for p in ctx.present]
            g = grad(*arrays, dO=dout, dS=dS, state=ctx.state, **ctx.config)
            res = []
            for name, x in zip(_INPUTS, arrays):
                res.append(None if x is None else torch.from_numpy(g["d" + name]).to(x.dtype))
            dS0 = None if ctx.S0_dtype is None else torch.from_numpy(g["dS0"]).to(ctx.S0_dtype)
            return (*res, dS0, None)

    return FalconFunction


_FUNCTION = []


def torch_run(q, k, v, beta, alpha=None, gain=None, S0=None, **config):
    """run() on CPU torch tensors, differentiable: returns (out, S) whose
    backward() runs libfalcon's backward pass (falcon_backward) with the same
    configuration (keyword arguments of run(): variant, form, precision,
    backend, ...; cu_seqlens, qk_heads, head_map). S0: the initial memory ([m,n],
    [B,H,m,n] or, packed, [seqs,H,m,n]) or None."""
    if not _is_torch(q):
        raise TypeError("torch_run takes torch tensors (use run() and grad() for numpy arrays)")
    if not _FUNCTION:
        _FUNCTION.append(_function())
    return _FUNCTION[0].apply(q, k, v, beta, alpha, gain, S0, config)
