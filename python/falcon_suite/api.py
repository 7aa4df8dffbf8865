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
        window=1, chunk="auto", threads=0, state=None, mpfr_bits=256):
    """Run a Falcon recurrence with libfalcon.

    Shapes: one sequence q, k, gain [T,n], v [T,m], beta, alpha [T]; or a
    batch [B,T,H,n] / [B,T,H,m] / [B,T,H]. Inputs are numpy arrays or torch
    tensors (any device; bf16 and fp16 widened exactly to float32) and are
    converted to the run's precision (float64 for "fp64", float32 for the
    others); when q is a torch tensor, so are the results (on the CPU). "tf32" and "bf16"
    run the chunk form with its matrix products' operands rounded to those
    formats and fp32 accumulation, as tensor cores compute (form="chunk").

    state: None (a fresh state), a State (carried and updated in place), or an
    array with the initial memory S ([m,n] or [B,H,m,n]; no previous key and
    no history).

    Returns (out, S): the reads [T,m] or [B,T,H,m] in the run's precision and
    the final memory [m,n] or [B,H,m,n] in float64 (the state is kept in
    double; after an fp32 recurrent run with a decay it is a float32 matrix
    times a float32 scale, the lazy decay of docs/math.md section 8). Raises FalconError (with falcon_last_error()) on a non-zero status.
    """
    L = _lib.lib()
    if precision not in _DTYPES:
        raise ValueError("precision must be 'fp32', 'fp64', 'tf32' or 'bf16', not %r" % (precision,))
    dt = _DTYPES[precision]
    as_torch = _is_torch(q)  # tensors in, tensors out
    sh, (q, k, v, beta, alpha, gain) = call_arrays(dt, q, k, v, beta, alpha, gain)
    batched, lead, (B, T, H, n, m) = sh.batched, sh.lead, sh.dims

    cfg = make_config(variant=variant, form=form, backend=backend, precision=precision, align=align,
                      phi=phi, eps=eps, window=window, chunk=chunk, threads=threads, mpfr_bits=mpfr_bits)
    inp = _lib.Inputs(B, T, H, n, m, _ptr(q), _ptr(k), _ptr(v), _ptr(beta), _ptr(alpha), _ptr(gain))
    st, own = _state_for(state, cfg, B, H, n, m, batched)
    out = np.empty(lead + (m,), dtype=dt)
    try:
        status = L.falcon_run(ctypes.byref(cfg), ctypes.byref(inp), st._h,
                              out.ctypes.data_as(ctypes.c_void_p))
        _lib.check_status(status, "falcon_run")
        S = st.memory
    finally:
        if own is not None:
            own.close()
    S = S.reshape((B, H, m, n)) if batched else S.reshape((m, n))
    if as_torch:
        import torch
        return torch.from_numpy(out), torch.from_numpy(S)
    return out, S


class Shapes:
    """What q and v say: batched, lead ((B,T,H) or (T,)) and dims (B,T,H,n,m)."""

    def __init__(self, q, v):
        if q.ndim == 2:
            self.batched = False
            T, n = q.shape
            B = H = 1
        elif q.ndim == 4:
            self.batched = True
            B, T, H, n = q.shape
        else:
            raise ValueError("q must be [T,n] or [B,T,H,n], got shape %s" % (q.shape,))
        self.lead = (B, T, H) if self.batched else (T,)
        if v.ndim != q.ndim or v.shape[:-1] != q.shape[:-1]:
            raise ValueError("v has shape %s, expected %s + (m,)" % (v.shape, self.lead))
        self.dims = (B, T, H, n, v.shape[-1])


def call_arrays(dt, q, k, v, beta, alpha, gain):
    """(Shapes, the six inputs as contiguous arrays of dt; None stays None)."""
    q, v = as_numpy(q), as_numpy(v)
    sh = Shapes(q, v)
    q = _arr(q, dt, "q")
    return sh, (q, _arr(k, dt, "k", q.shape), _arr(v, dt, "v"), _arr(beta, dt, "beta", sh.lead),
                _arr(alpha, dt, "alpha", sh.lead), _arr(gain, dt, "gain", q.shape))


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


def _state_for(state, cfg, B, H, n, m, batched):
    """(the State to run on, the one to close after or None): the caller's
    State, or a new one holding the memory array `state` (or a fresh one)."""
    own = None
    if state is None or not isinstance(state, State):
        S0 = None
        if state is not None:  # [m,n] or [B,H,m,n], nothing else (a transposed S is not reinterpreted)
            S0 = _arr(state, np.float64, "state")
            want = (B, H, m, n) if batched else (m, n)
            if S0.shape != want:
                raise ValueError("state has shape %s, expected %s" % (S0.shape, want))
        own = State(B * H, n, m, max(cfg.window, 1))
        if S0 is not None:
            own.memory = S0.reshape((B * H, m, n))
        st = own
    else:
        st = state
    return st, own


def reference(q, k, v, beta, alpha=None, gain=None, *, variant="falcon1", form="recurrent",
              align="prefix", phi="identity", eps=1e-6, window=1, chunk="auto", threads=0,
              state=None, mpfr_bits=256):
    """run() through the MPFR backend (mpfr_bits of precision), inputs
    converted exactly to float64, results rounded once to float64."""
    return run(q, k, v, beta, alpha, gain, variant=variant, form=form, backend="mpfr",
               precision="fp64", align=align, phi=phi, eps=eps, window=window, chunk=chunk,
               threads=threads, state=state, mpfr_bits=mpfr_bits)
