"""Loading libfalcon and mirroring include/falcon.h with ctypes.

The structures below copy the C declarations field by field, in order; the
enums are plain ints whose values come from the library's own name parsers
(falcon_variant_parse and friends), so no enum value is duplicated here.
"""
import ctypes
import ctypes.util
import operator
import os

__all__ = ["FalconError", "lib", "grade_lib", "Config", "Inputs", "StateView"]


class FalconError(RuntimeError):
    """A libfalcon call returned a non-zero status.

    `status` is the falcon_status number, `status_name` its name
    (e.g. "FALCON_E_RANGE"), and the message is falcon_last_error(). The
    library's structured error (falcon_last_error_info) is there too, for a
    program that acts on it: `input` (e.g. "k", "config.eps", a file's
    path), `rule` (a stable id, e.g. "beta-range"), `index` (the flat
    element), `t` (the step) and `head`; "" or -1 when not known.
    """

    def __init__(self, message, status=None, status_name=None, input="", rule="", index=-1, t=-1, head=-1):
        super().__init__(message)
        self.status = status
        self.status_name = status_name
        self.input = input
        self.rule = rule
        self.index = index
        self.t = t
        self.head = head


c_int64 = ctypes.c_int64
c_int = ctypes.c_int
c_void_p = ctypes.c_void_p
c_double_p = ctypes.POINTER(ctypes.c_double)


class Config(ctypes.Structure):
    """struct falcon_config."""

    _fields_ = [
        ("variant", c_int),
        ("align", c_int),
        ("phi", c_int),
        ("form", c_int),
        ("backend", c_int),
        ("precision", c_int),
        ("eps", ctypes.c_double),
        ("window", c_int64),
        ("chunk", c_int64),
        ("mpfr_bits", c_int),
        ("threads", c_int),
    ]


class Inputs(ctypes.Structure):
    """struct falcon_inputs."""

    _fields_ = [
        ("B", c_int64),
        ("T", c_int64),
        ("H", c_int64),
        ("n", c_int64),
        ("m", c_int64),
        ("q", c_void_p),
        ("k", c_void_p),
        ("v", c_void_p),
        ("beta", c_void_p),
        ("alpha", c_void_p),
        ("gain", c_void_p),
        ("cu_seqlens", ctypes.POINTER(c_int64)),
        ("seqs", c_int64),
        ("qk_heads", c_int64),
        ("head_map", c_int),
    ]


class ErrorInfo(ctypes.Structure):
    """falcon_error_info (include/falcon.h)."""
    _fields_ = [
        ("status", c_int),
        ("input", ctypes.c_char_p),
        ("rule", ctypes.c_char_p),
        ("index", c_int64),
        ("t", c_int64),
        ("head", c_int64),
        ("message", ctypes.c_char_p),
    ]


class StateView(ctypes.Structure):
    """struct falcon_state_view."""

    _fields_ = [
        ("heads", c_int64),
        ("n", c_int64),
        ("m", c_int64),
        ("window", c_int64),
        ("keep", c_int64),
        ("S", c_double_p),
        ("prev_key", c_double_p),
        ("has_prev", ctypes.POINTER(ctypes.c_uint8)),
        ("hist_k", c_double_p),
        ("hist_v", c_double_p),
        ("hist_len", ctypes.POINTER(c_int64)),
    ]


class Library:
    """One shared library of the suite the package loads: its file name, the
    environment variable that names another path for it, whether the
    package needs it, and the function (if any) that links it into
    libfalcon once loaded: void f(void), called after loading it (harmless
    where loading already attached it)."""

    def __init__(self, filename, env, required=True, attach=None):
        self.filename = filename
        self.env = env
        self.required = required
        self.attach = attach

    @property
    def soname(self):
        return self.filename + ".0"


# Every library, libfalcon first: it is loaded RTLD_GLOBAL, so the others'
# DT_NEEDED libfalcon.so.0 is satisfied by its soname, wherever they lie.
# A wheel carries each one that was built (setup.py reads this list). The
# MPFR reference is optional (an MPFR=0 build has none): without it the
# mpfr backend reports itself unavailable.
LIBRARIES = (
    Library("libfalcon.so", "FALCON_LIB"),
    Library("libfalcon-grade.so", "FALCON_GRADE_LIB"),
    Library("libfalcon-ref.so", "FALCON_REF_LIB", required=False, attach="falcon_reference_attach"),
)
BUNDLE_DIR = "_libs"  # inside the package, where a wheel carries them


def _package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def _package_build_dir():
    """build/ of the source tree this package sits in (python/falcon_suite/ -> ../../build)."""
    return os.path.normpath(os.path.join(_package_dir(), os.pardir, os.pardir, "build"))


def _candidates(spec, beside=None):
    """Where to look for a library, in order: $ENV (then the only choice),
    beside the libfalcon in use, the copy the wheel carries, the source
    tree's build/, then the system's loader (ldconfig, the soname)."""
    if os.environ.get(spec.env):
        yield os.environ[spec.env]
        return
    dirs = [beside] if beside else []
    for d in dirs + [os.path.join(_package_dir(), BUNDLE_DIR), _package_build_dir()]:
        yield os.path.join(d, spec.filename)
    found = ctypes.util.find_library(spec.filename[3:].split(".so")[0])
    if found:
        yield found
    yield spec.soname
    yield spec.filename


def _load(spec, beside=None, mode=ctypes.DEFAULT_MODE):
    """(CDLL, path) of the first candidate that loads; FalconError naming
    every one tried when none does."""
    errors = []
    for path in _candidates(spec, beside):
        if os.path.sep in path and not os.path.exists(path):
            errors.append("%s: no such file" % path)
            continue
        try:
            return ctypes.CDLL(path, mode=mode), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise FalconError("cannot load %s (set %s to its path): %s" % (spec.filename, spec.env, "; ".join(errors)))


_loaded = {}  # file name -> (CDLL, path)


def _declare(L):
    L.falcon_config_default.argtypes = [ctypes.POINTER(Config)]
    L.falcon_config_default.restype = None
    L.falcon_run.argtypes = [ctypes.POINTER(Config), ctypes.POINTER(Inputs), c_void_p, c_void_p]
    L.falcon_run.restype = c_int
    L.falcon_run_pool.argtypes = [ctypes.POINTER(Config), ctypes.POINTER(Inputs), c_void_p,
                                  ctypes.POINTER(c_int64), c_void_p]
    L.falcon_run_pool.restype = c_int
    L.falcon_validate.argtypes = [ctypes.POINTER(Config), ctypes.POINTER(Inputs), c_void_p]
    L.falcon_validate.restype = c_int
    L.falcon_state_create.argtypes = [c_int64, c_int64, c_int64, c_int64, ctypes.POINTER(c_void_p)]
    L.falcon_state_create.restype = c_int
    L.falcon_state_free.argtypes = [c_void_p]
    L.falcon_state_free.restype = None
    L.falcon_state_reset.argtypes = [c_void_p]
    L.falcon_state_reset.restype = c_int
    L.falcon_state_copy.argtypes = [c_void_p, ctypes.POINTER(c_void_p)]
    L.falcon_state_copy.restype = c_int
    L.falcon_state_get_view.argtypes = [c_void_p]
    L.falcon_state_get_view.restype = StateView
    L.falcon_state_scale.argtypes = [c_void_p]
    L.falcon_state_scale.restype = c_double_p
    L.falcon_state_set_memory.argtypes = [c_void_p, c_double_p]
    L.falcon_state_set_memory.restype = c_int
    L.falcon_state_check.argtypes = [c_void_p, c_int]
    L.falcon_state_check.restype = c_int
    L.falcon_checkpoint_save.argtypes = [c_void_p, ctypes.c_char_p]
    L.falcon_checkpoint_save.restype = c_int
    L.falcon_checkpoint_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(c_void_p)]
    L.falcon_checkpoint_load.restype = c_int
    L.falcon_outputs_begin.argtypes = [ctypes.POINTER(c_void_p)]
    L.falcon_outputs_begin.restype = c_int
    L.falcon_outputs_file.argtypes = [c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(c_int)]
    L.falcon_outputs_file.restype = c_int
    L.falcon_outputs_fd.argtypes = [c_void_p, c_int]
    L.falcon_outputs_fd.restype = c_int
    L.falcon_outputs_commit.argtypes = [c_void_p]
    L.falcon_outputs_commit.restype = c_int
    L.falcon_outputs_abort.argtypes = [c_void_p]
    L.falcon_outputs_abort.restype = None
    L.falcon_last_error.argtypes = []
    L.falcon_last_error.restype = ctypes.c_char_p
    L.falcon_last_error_info.argtypes = []
    L.falcon_last_error_info.restype = ctypes.POINTER(ErrorInfo)
    L.falcon_status_name.argtypes = [c_int]
    L.falcon_status_name.restype = ctypes.c_char_p
    L.falcon_backend_available.argtypes = [c_int]
    L.falcon_backend_available.restype = c_int
    L.falcon_backend_resolve.argtypes = [c_int]
    L.falcon_backend_resolve.restype = c_int
    L.falcon_backend_name.argtypes = [c_int]
    L.falcon_backend_name.restype = ctypes.c_char_p
    L.falcon_variant_has_window.argtypes = [c_int]
    L.falcon_variant_has_window.restype = c_int
    L.falcon_variant_has_gain.argtypes = [c_int]
    L.falcon_variant_has_gain.restype = c_int
    for what in ("variant", "align", "phi", "form", "backend", "precision"):
        f = getattr(L, "falcon_%s_parse" % what)
        f.argtypes = [ctypes.c_char_p]
        f.restype = c_int


def lib():
    """The loaded libfalcon (see _candidates), with every optional library
    that attaches to it found and attached."""
    main = LIBRARIES[0]
    if main.filename not in _loaded:
        L, path = _load(main, mode=ctypes.RTLD_GLOBAL)
        _declare(L)
        _loaded[main.filename] = L, path
        for spec in LIBRARIES[1:]:
            if spec.attach:
                _attach(spec, os.path.dirname(path))
    return _loaded[main.filename][0]


def _attach(spec, beside):
    """Load spec's library and call its attach function; an optional one
    that is not there is left out (its features report themselves absent),
    unless its variable names it."""
    try:
        L, path = _load(spec, beside, ctypes.RTLD_GLOBAL)
    except FalconError:
        if spec.required or os.environ.get(spec.env):
            raise
        return
    fn = getattr(L, spec.attach, None)
    if fn is None:
        raise FalconError("%s: %s has no function %s" % (spec.filename, path, spec.attach))
    fn.argtypes = []
    fn.restype = None
    fn()
    _loaded[spec.filename] = L, path


def lib_path():
    lib()
    return _loaded[LIBRARIES[0].filename][1]


def library_paths():
    """{file name: path} of every library loaded so far."""
    return {name: path for name, (_, path) in _loaded.items()}


def grade_lib():
    """libfalcon-grade.so, by the same search as libfalcon's, beside the
    libfalcon in use first."""
    spec = LIBRARIES[1]
    if spec.filename not in _loaded:
        L, path = _load(spec, os.path.dirname(lib_path()))
        for name in ("falcon_grade_export_main", "falcon_grade_check_main"):
            f = getattr(L, name)
            f.argtypes = [c_int, ctypes.POINTER(ctypes.c_char_p)]
            f.restype = c_int
        _loaded[spec.filename] = L, path
    return _loaded[spec.filename][0]


def last_error():
    msg = lib().falcon_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def check_status(status, what=""):
    """Raise FalconError carrying falcon_last_error() for a non-zero status."""
    if status == 0:
        return
    L = lib()
    name = L.falcon_status_name(status)
    name = name.decode() if name else str(status)
    msg = last_error() or name
    info = L.falcon_last_error_info().contents
    text = lambda b: b.decode("utf-8", "replace") if b else ""
    raise FalconError("%s%s" % (what + ": " if what else "", msg), status, name,
                      input=text(info.input), rule=text(info.rule), index=info.index, t=info.t, head=info.head)


def as_int(name, value, lo, hi):
    """An exact integer in [lo, hi]: no float truncated, no bool, and nothing
    that ctypes would wrap modulo 2^32 or 2^64."""
    if isinstance(value, bool):
        raise TypeError("%s must be an integer, not a bool" % name)
    try:
        i = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an integer, not %r" % (name, value)) from None
    if not lo <= i <= hi:
        raise ValueError("%s = %d is out of range [%d, %d]" % (name, i, lo, hi))
    return i


def parse_enum(kind, value):
    """A CLI spelling ("falcon1", "prefix", "fp32" ...) or an enum value -> the
    enum value, by the library's own parser (an integer is passed on for the
    library to check, after it was checked to fit a C int)."""
    if not isinstance(value, (str, bytes)):
        return as_int(kind, value, 0, 2**31 - 1)
    v = lib()
    r = getattr(v, "falcon_%s_parse" % kind)(os.fsencode(value) if isinstance(value, str) else value)
    if r < 0:
        raise ValueError("unknown %s %r" % (kind, value))
    return r
