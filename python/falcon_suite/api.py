"""run() and reference(): numpy arrays through falcon_run."""
import ctypes
import os

import numpy as np

from . import _lib
from ._lib import FalconError

__all__ = ["State", "run", "reference"]

# tf32, bf16: fp32 data, the chunk form's matrix-product operands rounded
_DTYPES = {"fp32": np.float32, "fp64": np.float64, "tf32": np.float32, "bf16": np.float32}


class State:
    """The carried state of `heads` sequences (a falcon_state): the memory S
    [heads, m, n], the previous raw key (prefix alignment) and the last W-1
    raw examples (window variants). Heads of a [B,T,H,D] batch are numbered
    b*H + h. Pass it to run(state=...) to carry it from one call to the next;
    the call updates it in place."""

    def __init__(self, heads, n, m, window=1, _handle=None):
        L = _lib.lib()
        self._L = L
        if _handle is None:
            h = ctypes.c_void_p()
            dims = [_lib.as_int(k, x, -2**63, 2**63 - 1) for k, x in
                    (("heads", heads), ("n", n), ("m", m), ("window", window))]
            _lib.check_status(L.falcon_state_create(*dims, ctypes.byref(h)), "state_create")
            _handle = h
        self._h = _handle

    @classmethod
    def load(cls, directory):
        """A state from a checkpoint directory (falcon_checkpoint_load)."""
        L = _lib.lib()
        h = ctypes.c_void_p()
        _lib.check_status(L.falcon_checkpoint_load(os.fsencode(directory), ctypes.byref(h)),
                          "checkpoint_load")
        return cls(0, 0, 0, 0, _handle=h)

    def save(self, directory):
        """Write the whole state as a checkpoint directory."""
        _lib.check_status(self._L.falcon_checkpoint_save(self._h, os.fsencode(directory)),
                          "checkpoint_save")

    def copy(self):
        h = ctypes.c_void_p()
        _lib.check_status(self._L.falcon_state_copy(self._h, ctypes.byref(h)), "state_copy")
        return State(0, 0, 0, 0, _handle=h)

    def reset(self):
        _lib.check_status(self._L.falcon_state_reset(self._h), "state_reset")

    def close(self):
        if getattr(self, "_h", None) is not None and self._h.value:
            self._L.falcon_state_free(self._h)
        self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _view(self):
        if self._h is None:
            raise ValueError("the state is closed")
        return self._L.falcon_state_get_view(self._h)

    @property
    def shape(self):
        """(heads, n, m, window)."""
        v = self._view()
        return (v.heads, v.n, v.m, v.window)

    @staticmethod
    def _copy_out(ptr, shape, ctype=ctypes.c_double, dtype=np.float64):
        count = int(np.prod(shape))
        if count == 0:
            return np.zeros(shape, dtype)
        buf = ctypes.cast(ptr, ctypes.POINTER(ctype * count)).contents
        return np.frombuffer(buf, dtype=dtype, count=count).reshape(shape).copy()

    @property
    def memory(self):
        """A copy of S, float64 [heads, m, n]."""
        v = self._view()
        return self._copy_out(v.S, (v.heads, v.m, v.n))

    @memory.setter
    def memory(self, S):
        """S as [heads, m, n] (or [m, n] for one head): any other shape, a
        transposed [n, m] or a flat array, is refused, not reinterpreted."""
        v = self._view()
        S = _arr(S, np.float64, "memory")
        want = (v.heads, v.m, v.n)
        if S.shape != want and not (v.heads == 1 and S.shape == want[1:]):
            raise ValueError("memory has shape %s, the state holds [heads, m, n] = %s"
                             % (S.shape, want))
        _lib.check_status(self._L.falcon_state_set_memory(
            self._h, S.ctypes.data_as(_lib.c_double_p)), "state_set_memory")

    def check(self, precision="fp32"):
        """Raise FalconError (FALCON_E_RANGE) when a run of `precision` cannot
        hold the state: below fp64 the memory is float32 and the carried keys
        and values are inputs, while the state holds float64 (a memory set
        here or left by an fp64 run may not fit). run() checks it too."""
        _lib.check_status(self._L.falcon_state_check(self._h, _lib.parse_enum("precision", precision)),
                          "state_check")

    def contents(self):
        """Copies of everything the state carries, as a dict of numpy arrays:
        S [heads,m,n], prev_key [heads,n], has_prev [heads] (bool),
        hist_k [heads,W-1,n], hist_v [heads,W-1,m], hist_len [heads], and
        scale [heads]: how the fp32 recurrent form continues S bit for bit
        (the lazy decay factor it keeps S divided by; S is the memory)."""
        v = self._view()
        H, n, m, keep = v.heads, v.n, v.m, v.keep
        return {
            "S": self._copy_out(v.S, (H, m, n)),
            "prev_key": self._copy_out(v.prev_key, (H, n)),
            "has_prev": self._copy_out(v.has_prev, (H,), ctypes.c_uint8, np.uint8).astype(bool),
            "hist_k": self._copy_out(v.hist_k, (H, keep, n)),
            "hist_v": self._copy_out(v.hist_v, (H, keep, m)),
            "hist_len": self._copy_out(v.hist_len, (H,), ctypes.c_int64, np.int64),
            "scale": self._copy_out(self._L.falcon_state_scale(self._h), (H,)),
        }


def _is_torch(x):
    """A torch.Tensor, told without importing torch (which may be absent)."""
    return type(x).__module__.split(".")[0] == "torch" and hasattr(x, "detach")


def as_numpy(x):
    """x as numpy: a torch tensor is detached and copied to the CPU, bf16 and
    fp16 widened to float32 (exactly: every half value is a float32 one,
    and numpy has no bf16); anything else goes through np.asarray."""
    if not _is_torch(x):
        return np.asarray(x)
    import torch  # already imported: x is one of its tensors
    t = x.detach().cpu()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()
    return t.numpy()


def _arr(x, dtype, name, shape=None):
    """x as a contiguous array of dtype. Only real numbers: complex, bool,
    strings and objects are refused, not converted (a complex array would
    lose its imaginary part). A finite value that the conversion to float32
    would turn into an infinity is named, as the CLI names it."""
    if x is None:
        return None
    x = as_numpy(x)
    if x.dtype.kind not in "fiu":
        raise TypeError("%s has dtype %s: the inputs are real numbers (float or integer)" % (name, x.dtype))
    if shape is not None and x.shape != tuple(shape):
        raise ValueError("%s has shape %s, expected %s" % (name, x.shape, tuple(shape)))
    a = np.ascontiguousarray(x, dtype=dtype)
    if a.dtype != x.dtype and a.dtype.kind == "f" and a.size:
        with np.errstate(invalid="ignore"):
            lost = np.isfinite(x) & ~np.isfinite(a)
        if lost.any():
            i = np.unravel_index(int(np.argmax(lost)), x.shape)
            raise _lib.FalconError("%s: element %s = %g does not fit in %s" % (name, list(i), x[i], a.dtype),
                                   None, "FALCON_E_RANGE")
    return a


def _ptr(a):
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


def run(q, k, v, beta, alpha=None, gain=None, *, variant="falcon1", form="recurrent",
        backend="auto", precision="fp32", align="prefix", phi="identity", eps=1e-6,
        window=1, chunk="auto", threads=0, state=None, mpfr_bits=256, cu_seqlens=None,
        qk_heads=None, head_map="interleaved"):
    """Run a Falcon recurrence with libfalcon.

    Shapes: one sequence q, k, gain [T,n], v [T,m], beta, alpha [T]; or a
    batch [B,T,H,n] / [B,T,H,m] / [B,T,H]. Inputs are numpy arrays or torch
    tensors (any device; bf16 and fp16 widened exactly to float32) and are
    converted to the run's precision (float64 for "fp64", float32 for the
    others); when q is a torch tensor, so are the results (on the CPU). "tf32" and "bf16"
    run the chunk form with its matrix products' operands rounded to those
    formats and fp32 accumulation, as tensor cores compute (form="chunk").

    Layouts (docs/math.md section 13), in every backend and form:

    cu_seqlens: a packed batch of variable-length sequences (fla's
    convention): integer offsets [seqs+1] into the T steps of inputs with
    B = 1 ([1,T,H,D]); sequence i is steps cu_seqlens[i]:cu_seqlens[i+1]
    and has a state of its own (heads i*H .. i*H+H-1), so the memory is
    [seqs,H,m,n] ([seqs,m,n] for [T,D] inputs) and a State passed in has
    seqs*H heads. The result is each sequence's run alone, bit for bit.
    qk_heads, head_map: grouped heads. q and k are [B,T,qk_heads,n] while
    v is [B,T,H,m] (qk_heads is q's head count; given, it must be that);
    value head h reads q/k head h // (H/qk_heads) ("interleaved": torch's
    repeat_interleave, fla) or h % qk_heads ("tiled": torch's repeat).
    The result is the call with q and k repeated to H heads, bit for bit.
    The library checks the values (offsets from 0 to T that never
    decrease, B = 1, qk_heads dividing H): FalconError names the rule.

    state: None (a fresh state), a State (carried and updated in place), or an
    array with the initial memory S ([m,n], [B,H,m,n] or, packed,
    [seqs,H,m,n]; no previous key and no history).

    Returns (out, S): the reads [T,m] or [B,T,H,m] in the run's precision and
    the final memory [m,n], [B,H,m,n] or [seqs,H,m,n] in float64 (the state is kept in
    double; after an fp32 recurrent run with a decay it is a float32 matrix
    times a float32 scale, the lazy decay of docs/math.md section 8). Raises FalconError (with falcon_last_error()) on a non-zero status.
    """
    L = _lib.lib()
    if precision not in _DTYPES:
        raise ValueError("precision must be 'fp32', 'fp64', 'tf32' or 'bf16', not %r" % (precision,))
    dt = _DTYPES[precision]
    as_torch = _is_torch(q)  # tensors in, tensors out
    sh, arrays = call_arrays(dt, q, k, v, beta, alpha, gain, cu_seqlens=cu_seqlens, qk_heads=qk_heads)
    m = sh.dims[4]
    cfg = make_config(variant=variant, form=form, backend=backend, precision=precision, align=align,
                      phi=phi, eps=eps, window=window, chunk=chunk, threads=threads, mpfr_bits=mpfr_bits)
    inp = make_inputs(sh, arrays, head_map)
    st, own = _state_for(state, cfg, sh)
    out = np.empty(sh.lead + (m,), dtype=dt)
    try:
        status = L.falcon_run(ctypes.byref(cfg), ctypes.byref(inp), st._h,
                              out.ctypes.data_as(ctypes.c_void_p))
        _lib.check_status(status, "falcon_run")
        S = st.memory
    finally:
        if own is not None:
            own.close()
    S = S.reshape(sh.state_shape)
    if as_torch:
        import torch
        return torch.from_numpy(out), torch.from_numpy(S)
    return out, S


def run_pool(q, k, v, beta, alpha=None, gain=None, *, pool, slots, variant="falcon1", form="recurrent",
             backend="auto", precision="fp32", align="prefix", phi="identity", eps=1e-6, window=1,
             chunk="auto", threads=0, mpfr_bits=256, cu_seqlens=None, qk_heads=None, head_map="interleaved"):
    """run() on a pool of states, as servers keep them (falcon_run_pool):
    pool is a State of P slots of H heads (P*H heads); sequence i of the
    call (batch row i, or packed sequence i) starts from slot slots[i] and
    is stored back there, or starts fresh and is not kept for slots[i] = -1.
    Every other slot keeps its bits; on an error (FalconError: slot-range,
    slot-twice, or run()'s rules) the whole pool does. Returns the reads."""
    L = _lib.lib()
    if precision not in _DTYPES:
        raise ValueError("precision must be 'fp32', 'fp64', 'tf32' or 'bf16', not %r" % (precision,))
    dt = _DTYPES[precision]
    sh, arrays = call_arrays(dt, q, k, v, beta, alpha, gain, cu_seqlens=cu_seqlens, qk_heads=qk_heads)
    cfg = make_config(variant=variant, form=form, backend=backend, precision=precision, align=align,
                      phi=phi, eps=eps, window=window, chunk=chunk, threads=threads, mpfr_bits=mpfr_bits)
    inp = make_inputs(sh, arrays, head_map)
    idx = np.ascontiguousarray(np.asarray(slots, dtype=np.int64).reshape(-1))
    if idx.size != (sh.seqs if sh.cu is not None else sh.dims[0]):
        raise ValueError("slots: one per sequence (%d), not %d" % (sh.seqs if sh.cu is not None else sh.dims[0],
                                                                    idx.size))
    out = np.empty(sh.lead + (sh.dims[4],), dtype=dt)
    status = L.falcon_run_pool(ctypes.byref(cfg), ctypes.byref(inp), pool._h,
                               idx.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
                               out.ctypes.data_as(ctypes.c_void_p))
    _lib.check_status(status, "falcon_run_pool")
    return out


class Shapes:
    """What q, v and cu_seqlens say of a call's shapes.

    batched: [B,T,H,D] inputs (else one sequence [T,D], B = H = 1); lead:
    (B,T,H) or (T,), v's, beta's and the reads' leading dimensions; qlead:
    q's and k's ((B,T,qk_heads) or (T,)); dims: (B,T,H,n,m); qk_heads: q's
    head count (H_qk); cu: the offsets as int64 or None, seqs: their count
    of sequences (len(cu) - 1); heads: the state's (seqs*H packed, else
    B*H); state_shape: the final memory's. Only what the shapes need is
    checked here: the values (B = 1 with cu_seqlens, the offsets, qk_heads
    dividing H) are the library's rules, reported by it."""

    def __init__(self, q, v, cu_seqlens=None, qk_heads=None):
        if q.ndim == 2:
            self.batched = False
            T, n = q.shape
            B = Hq = 1
        elif q.ndim == 4:
            self.batched = True
            B, T, Hq, n = q.shape
        else:
            raise ValueError("q must be [T,n] or [B,T,H_qk,n], got shape %s" % (q.shape,))
        if v.ndim != q.ndim or v.shape[:q.ndim - 2] != q.shape[:q.ndim - 2]:
            want = "(B, T, H, m) with (B, T) = %s" % (q.shape[:2],) if self.batched else "(%d, m)" % T
            raise ValueError("v has shape %s, expected %s" % (v.shape, want))
        H = v.shape[2] if self.batched else 1
        if Hq == 0 and H != 0:  # the library reads qk_heads 0 as H: q and k would be read past their end
            raise ValueError("q has shape %s: no heads, while v has %d" % (q.shape, H))
        if qk_heads is not None and _lib.as_int("qk_heads", qk_heads, 1, 2**63 - 1) != Hq:
            raise ValueError("qk_heads = %d but q has %d heads (shape %s): q and k are [B,T,qk_heads,n]"
                             % (qk_heads, Hq, q.shape))
        self.lead = (B, T, H) if self.batched else (T,)
        self.qlead = (B, T, Hq) if self.batched else (T,)
        self.dims = (B, T, H, n, v.shape[-1])
        self.qk_heads = Hq
        self.cu = _offsets(cu_seqlens)
        self.seqs = None if self.cu is None else len(self.cu) - 1
        m = v.shape[-1]
        if self.cu is None:
            self.heads = B * H
            self.state_shape = (B, H, m, n) if self.batched else (m, n)
        else:  # (a count below 1 is the library's to refuse: the shape then has none)
            count = max(self.seqs, 0)
            self.heads = count * H
            self.state_shape = (count, H, m, n) if self.batched else (count, m, n)


def _offsets(cu_seqlens):
    """cu_seqlens as a contiguous int64 array (None stays None): 1-D and of
    integers, converted exactly (floats and values beyond int64 are refused,
    not rounded or wrapped); their order and range are the library's rules."""
    if cu_seqlens is None:
        return None
    c = as_numpy(cu_seqlens)
    if c.ndim != 1:
        raise ValueError("cu_seqlens has shape %s: it is 1-D, [seqs + 1] offsets" % (c.shape,))
    if c.dtype.kind not in "iu" and c.size:  # (an empty list is float64 to numpy)
        raise TypeError("cu_seqlens has dtype %s: the offsets are integers" % c.dtype)
    if c.dtype.kind == "u" and c.size and int(c.max()) > 2**63 - 1:
        raise ValueError("cu_seqlens: %d does not fit in int64" % int(c.max()))
    return np.ascontiguousarray(c, dtype=np.int64)


def call_arrays(dt, q, k, v, beta, alpha, gain, cu_seqlens=None, qk_heads=None):
    """(Shapes, the six inputs as contiguous arrays of dt; None stays None)."""
    q, v = as_numpy(q), as_numpy(v)
    sh = Shapes(q, v, cu_seqlens, qk_heads)
    q = _arr(q, dt, "q")
    n = sh.dims[3]
    return sh, (q, _arr(k, dt, "k", q.shape), _arr(v, dt, "v"), _arr(beta, dt, "beta", sh.lead),
                _arr(alpha, dt, "alpha", sh.lead), _arr(gain, dt, "gain", sh.lead + (n,)))


# falcon_head_map (include/falcon.h)
_HEAD_MAPS = {"interleaved": 0, "tiled": 1}


def make_inputs(sh, arrays, head_map="interleaved"):
    """The falcon_inputs of call_arrays' result. It points into `arrays` and
    sh.cu: they must outlive the call. head_map: "interleaved", "tiled", or
    an enum value (passed on for the library to check)."""
    if isinstance(head_map, str):
        if head_map not in _HEAD_MAPS:
            raise ValueError("unknown head_map %r: 'interleaved' or 'tiled'" % (head_map,))
        head_map = _HEAD_MAPS[head_map]
    else:
        head_map = _lib.as_int("head_map", head_map, -2**31, 2**31 - 1)
    B, T, H, n, m = sh.dims
    inp = _lib.Inputs(B, T, H, n, m, *[_ptr(a) for a in arrays])
    if sh.cu is not None:
        inp.cu_seqlens = sh.cu.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
        inp.seqs = sh.seqs
    inp.qk_heads = sh.qk_heads
    inp.head_map = head_map
    return inp


def make_config(*, variant, form, backend, precision, align, phi, eps, window, chunk, threads, mpfr_bits):
    """The falcon_config of run()'s keyword arguments."""
    cfg = _lib.Config()
    _lib.lib().falcon_config_default(ctypes.byref(cfg))
    cfg.variant = _lib.parse_enum("variant", variant)
    cfg.form = _lib.parse_enum("form", form)
    cfg.backend = _lib.parse_enum("backend", backend)
    cfg.precision = _lib.parse_enum("precision", precision)
    cfg.align = _lib.parse_enum("align", align)
    cfg.phi = _lib.parse_enum("phi", phi)
    cfg.eps = float(eps)
    # exact integers that fit their C fields; the library checks the ranges
    cfg.window = _lib.as_int("window", window, -2**63, 2**63 - 1)
    # "auto": the library picks (falcon_chunk_auto)
    cfg.chunk = 0 if isinstance(chunk, str) and chunk == "auto" else _lib.as_int("chunk", chunk, 1, 2**63 - 1)
    cfg.threads = _lib.as_int("threads", threads, -2**31, 2**31 - 1)
    cfg.mpfr_bits = _lib.as_int("mpfr_bits", mpfr_bits, -2**31, 2**31 - 1)
    return cfg


def _state_for(state, cfg, sh):
    """(the State to run on, the one to close after or None): the caller's
    State, or a new one holding the memory array `state` (or a fresh one)
    of sh.state_shape."""
    own = None
    if state is None or not isinstance(state, State):
        S0 = None
        if state is not None:  # sh.state_shape, nothing else (a transposed S is not reinterpreted)
            S0 = _arr(state, np.float64, "state")
            if S0.shape != sh.state_shape:
                raise ValueError("state has shape %s, expected %s" % (S0.shape, sh.state_shape))
        # At least one head: a packed call with no sequence (seqs < 1)
        # reaches the library's cu_seqlens rule, not state_create's.
        own = State(max(sh.heads, 1), sh.dims[3], sh.dims[4], max(cfg.window, 1))
        if S0 is not None and S0.size:
            own.memory = S0.reshape((sh.heads,) + sh.state_shape[-2:])
        st = own
    else:
        st = state
    return st, own


def reference(q, k, v, beta, alpha=None, gain=None, *, variant="falcon1", form="recurrent",
              align="prefix", phi="identity", eps=1e-6, window=1, chunk="auto", threads=0,
              state=None, mpfr_bits=256, cu_seqlens=None, qk_heads=None, head_map="interleaved"):
    """run() through the MPFR backend (mpfr_bits of precision), inputs
    converted exactly to float64, results rounded once to float64."""
    return run(q, k, v, beta, alpha, gain, variant=variant, form=form, backend="mpfr",
               precision="fp64", align=align, phi=phi, eps=eps, window=window, chunk=chunk,
               threads=threads, state=state, mpfr_bits=mpfr_bits, cu_seqlens=cu_seqlens,
               qk_heads=qk_heads, head_map=head_map)
