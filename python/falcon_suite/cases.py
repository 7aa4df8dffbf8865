"""Case sets and grading: export_cases(), check(), load_case(), write_result().

export_cases() and check() call the entry points of `falcon cases export`
and `falcon check` in libfalcon-grade.so, in this process; what they print
is captured and shown again through sys.stdout / sys.stderr (so pytest's
capture and notebooks see it). load_case() is plain numpy and needs no
library; write_result() and write_manifest() replace their files through
libfalcon's output transaction (falcon_outputs_*), so they need
libfalcon.so but not libfalcon-grade.so.
"""
import ctypes
import json
import os
import stat
import sys
import tempfile
import types

import numpy as np

from . import _lib
from ._lib import FalconError
from .api import as_numpy

__all__ = ["CheckResult", "CheckInputError", "export_cases", "check", "load_case",
           "load_checkpoint", "write_result", "write_manifest"]


class CheckInputError(FalconError):
    """`falcon check` or `falcon cases export` exited with status 2: bad input
    (a missing result, a wrong shape, NaN/Inf, an unreadable file). The
    message is the "falcon: error: ..." line."""


_libc = None


def _flush_c_stdio():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None)
        _libc.fflush.argtypes = [ctypes.c_void_p]
    _libc.fflush(None)


def _call_main(fn_name, argv, quiet=False):
    """Call int fn(int argc, char **argv) of libfalcon-grade.so with fds 1 and
    2 captured (echoed unless quiet; stderr only when the call succeeded);
    returns (status, stdout text, stderr text). Not for concurrent use from
    several threads: it redirects the process's file descriptors."""
    fn = getattr(_lib.grade_lib(), fn_name)
    args = [os.fsencode(a) if not isinstance(a, bytes) else a for a in argv]
    arr = (ctypes.c_char_p * (len(args) + 1))(*args, None)
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        saved = os.dup(1), os.dup(2)
        try:
            os.dup2(fo.fileno(), 1)
            os.dup2(fe.fileno(), 2)
            try:
                status = fn(len(args), arr)
            finally:
                _flush_c_stdio()
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        fo.seek(0)
        fe.seek(0)
        out = fo.read().decode("utf-8", "replace")
        err = fe.read().decode("utf-8", "replace")
    if not quiet:
        sys.stdout.write(out)
        sys.stdout.flush()
    if err and status in (0, 1):  # a failure's message goes into the exception instead
        sys.stderr.write(err)
        sys.stderr.flush()
    return status, out, err


def _error_line(err, status):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("falcon: error:"):
            return ln
    return lines[-1] if lines else "exit status %d" % status


def _option_args(filters):
    """Keyword filters -> CLI options: variant="falcon1" -> --variant falcon1;
    a list -> comma-separated; True -> a bare flag; None/False -> omitted."""
    args = []
    for key, val in filters.items():
        if val is None or val is False:
            continue
        opt = "--" + key.replace("_", "-")
        if val is True:
            args.append(opt)
        elif isinstance(val, (list, tuple, set)):
            args += [opt, ",".join(str(x) for x in val)]
        else:
            args += [opt, str(val)]
    return args


def export_cases(directory, profile="quick", quiet=False, **filters):
    """Export a case set into `directory` (`falcon cases export DIR --profile
    PROFILE [options]`); keyword filters become options (layout="fla" ->
    --layout fla). Returns the parsed index.json."""
    directory = os.fsdecode(directory)
    argv = ["export", directory, "--profile", profile] + _option_args(filters)
    status, out, err = _call_main("falcon_grade_export_main", argv, quiet)
    if status != 0:
        cls = CheckInputError if status == 2 else FalconError
        raise cls(_error_line(err, status), status)
    with open(os.path.join(directory, "index.json")) as f:
        return json.load(f)


class CheckResult:
    """What `falcon check` decided. `passed` is True when every case judged
    passed and no more were skipped than `max_skipped` allows (exit 0);
    `cases` the per-case dicts of the JSON report (name, variant, form,
    align, decay, status, out_u, state_u, state_given, thr_out_u,
    thr_state_u, ratio, identical, dtype), `failed` / `skipped` /
    `unjudgeable` / `passed_cases` their names (unjudgeable: a threshold
    above 2^-4 relative error in the unit, neither passed nor failed),
    `groups` the per-(variant, form) summary, `report` the text printed,
    `json` the whole JSON document, `status` the exit status (0 or 1).
    `first_bad` maps each failing case to where it went wrong: (step,
    batch, head), the first step t by which the error of the outputs of
    steps 0..t exceeds the case's threshold and the batch row and head
    with the largest error there; None when the state alone failed (the
    JSON's first_bad_step, first_bad_batch, first_bad_head, state_only)."""

    def __init__(self, doc, status, report):
        self.json = doc
        self.status = status
        self.report = report
        self.passed = bool(doc.get("passed")) and status == 0
        self.cases = list(doc.get("cases", []))
        self.groups = list(doc.get("groups", []))
        self.counts = dict(doc.get("counts", {}))
        self.precision = doc.get("precision")
        self.u = doc.get("u")
        self.failed = [c["name"] for c in self.cases if c.get("status") == "fail"]
        self.skipped = [c["name"] for c in self.cases if c.get("status") == "skip"]
        self.unjudgeable = [c["name"] for c in self.cases if c.get("status") == "unjudgeable"]
        self.passed_cases = [c["name"] for c in self.cases if c.get("status") == "pass"]
        self.first_bad = {c["name"]: _first_bad(c) for c in self.cases if c.get("status") == "fail"}

    def __bool__(self):
        return self.passed

    def case(self, name):
        for c in self.cases:
            if c["name"] == name:
                return c
        raise KeyError(name)

    def __repr__(self):
        return "<CheckResult %s: %d pass, %d fail, %d skip, %d not judgeable (%s)>" % (
            "passed" if self.passed else "FAILED", len(self.passed_cases), len(self.failed),
            len(self.skipped), len(self.unjudgeable), self.precision)

    def summary(self):
        """One line per failing case: name, errors and thresholds in units."""
        lines = []
        for c in self.cases:
            if c.get("status") == "fail":
                lines.append("%s: out %.3g u (limit %.3g), state %s u (limit %.3g)" % (
                    c["name"], c.get("out_u") or 0.0, c.get("thr_out_u") or 0.0,
                    "%.3g" % c["state_u"] if c.get("state_u") is not None else "-",
                    c.get("thr_state_u") or 0.0))
                at = _first_bad(c)
                lines[-1] += ": first bad step t = %d (batch %d, head %d)" % at if at else ": state only"
        return "\n".join(lines)


def _first_bad(case):
    """(step, batch, head) where a failing case's outputs went wrong, or
    None (its state alone failed) from its JSON record."""
    if case.get("first_bad_step") is None:
        return None
    return case["first_bad_step"], case["first_bad_batch"], case["first_bad_head"]


def check(cases_dir, results_dir, precision=None, junit=None, verbose=False, quiet=False,
          require_state=False, max_skipped=None, trust_set=False):
    """Grade the results in `results_dir` against the case set `cases_dir`
    (`falcon check`), in units of roundoff of `precision` (fp64, fp32, tf32,
    bf16, fp16; None, the default: the set's own, as the command's). Returns
    a CheckResult: `assert falcon_suite.check(cases, results).passed`. `junit`:
    also write JUnit XML there; `quiet`: do not echo the printed table (it
    is in .report); `require_state`: a missing state.npy is bad input;
    `max_skipped`: the largest fraction of cases that may be skipped.
    The set is verified first: re-derived in memory from the export its
    index.json records, any file that differs (an edited threshold or
    reference, another version's set) is bad input; `trust_set=True`
    (--trust-set) judges the set as it is, and the report says so.
    Raises CheckInputError for bad input (exit status 2: a missing result, a
    wrong shape, NaN/Inf, no case judgeable, an edited set ...), carrying
    the error line."""
    fd, jpath = tempfile.mkstemp(prefix="falcon-check-", suffix=".json")
    os.close(fd)
    os.unlink(jpath)  # the command writes it
    try:
        argv = ["check", str(cases_dir), "--results", str(results_dir), "--json", jpath]
        if precision:
            argv += ["--precision", precision]
        if junit:
            argv += ["--junit", str(junit)]
        if verbose:
            argv.append("--verbose")
        if require_state:
            argv.append("--require-state")
        if max_skipped is not None:
            argv += ["--max-skipped", repr(float(max_skipped))]
        if trust_set:
            argv.append("--trust-set")
        status, out, err = _call_main("falcon_grade_check_main", argv, quiet)
        if status == 2:
            raise CheckInputError(_error_line(err, status), status)
        if status not in (0, 1):
            raise FalconError("falcon check: exit status %d: %s" % (status, _error_line(err, status)),
                              status)
        with open(jpath) as f:
            doc = json.load(f)
    finally:
        if os.path.exists(jpath):
            os.unlink(jpath)
    return CheckResult(doc, status, out)


def load_checkpoint(directory):
    """A checkpoint directory (see src/checkpoint.c) as a dict of float64
    numpy arrays: S [H,m,n], prev_key [H,n], has_prev [H] (bool), hist_k
    [H,W-1,n], hist_v [H,W-1,m], hist_len [H] (int), scale [H] (1 for a
    version 1 checkpoint), and heads, n, m, window."""
    meta = {}
    with open(os.path.join(directory, "falcon-checkpoint.txt")) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0] in ("heads", "n", "m", "window"):
                meta[parts[0]] = int(parts[1])
    d = dict(meta)
    for name in ("S", "prev_key", "has_prev", "hist_k", "hist_v", "hist_len"):
        d[name] = np.load(os.path.join(directory, name + ".npy")).astype(np.float64)
    d["has_prev"] = d["has_prev"] != 0
    d["hist_len"] = d["hist_len"].astype(np.int64)
    # version 2: the fp32 recurrent form's lazy decay factor (S is the memory itself)
    sp = os.path.join(directory, "scale.npy")
    d["scale"] = np.load(sp).astype(np.float64) if os.path.exists(sp) else np.ones(meta.get("heads", 0))
    return d


def load_case(case_dir):
    """One exported case as a namespace: the fields of case.json as attributes
    (name, variant, form, align, phi, eps, window, chunk, B, T, H, n, m, decay,
    layout, scale, precision, thresholds, expected ...), plus numpy arrays:
    q, k, v, beta, alpha (None without decay), g (the log decay, for a case
    whose "inputs" name one; the sets this version exports give decays as
    alpha only, so it is None), gain (or None), state0 (the layout's state
    array), ref_out, ref_state, and `state_in`: load_checkpoint() of the
    initial carried state (S, prev_key, has_prev, hist_k, hist_v, hist_len).
    A packed case (docs/cases.md) has cu_seqlens (int64 [seqs + 1]) and
    seqs; a grouped one qk_heads and head_map ("interleaved" or "tiled");
    cu_seqlens is None and seqs, qk_heads absent for the others."""
    with open(os.path.join(case_dir, "case.json")) as f:
        meta = json.load(f)
    ns = types.SimpleNamespace(**meta)
    ns.dir = case_dir
    ns.case = meta
    inputs = meta.get("inputs", {})
    for key in ("q", "k", "v", "beta", "alpha", "g", "gain", "cu_seqlens"):
        fname = inputs.get(key)
        setattr(ns, key, np.load(os.path.join(case_dir, fname)) if fname else None)
    st = meta.get("state_in")
    ns.state_in = load_checkpoint(os.path.join(case_dir, st)) if st else None
    ns.state0 = None
    if st and os.path.exists(os.path.join(case_dir, st + ".npy")):
        ns.state0 = np.load(os.path.join(case_dir, st + ".npy"))
    ref = meta.get("reference", {}) or {}
    ns.ref_out = np.load(os.path.join(case_dir, ref["out"])) if ref.get("out") else None
    ns.ref_state = np.load(os.path.join(case_dir, ref["state"])) if ref.get("state") else None
    if not hasattr(ns, "scale"):
        ns.scale = 1.0
    # A set exported with --grad: the cotangents and the reference's
    # gradients ({"dq": array, ...}, the ones the case has); None otherwise.
    cot, grads = meta.get("cotangents"), meta.get("gradients")
    ns.dO = np.load(os.path.join(case_dir, cot["dO"])) if cot else None
    ns.dS_T = np.load(os.path.join(case_dir, cot["dS_T"])) if cot else None
    ns.ref_grads = {g: np.load(os.path.join(case_dir, e["reference"])) for g, e in grads.items()} if grads else None
    return ns


def _replace_file(path, write):
    """Write a file through the library's output transaction
    (falcon_outputs_*, the rules `falcon run` writes by): into a temporary
    beside it, fsynced, then renamed onto it, so that a failure leaves the
    old file whole and no partial one. A symlink is followed to the regular
    file it names, never replaced; a device, FIFO, directory or dangling
    link is refused (FalconError)."""
    L = _lib.lib()
    tx, slot = ctypes.c_void_p(), ctypes.c_int(-1)
    _lib.check_status(L.falcon_outputs_begin(ctypes.byref(tx)))
    try:
        _lib.check_status(L.falcon_outputs_file(tx, b"result", os.fsencode(path), ctypes.byref(slot)))
        with os.fdopen(os.dup(L.falcon_outputs_fd(tx, slot)), "wb") as f:
            write(f)
        status, tx = L.falcon_outputs_commit(tx), None  # the commit frees tx, whatever it returns
        _lib.check_status(status)
    finally:
        if tx:
            L.falcon_outputs_abort(tx)


def _plain_name(name):
    name = os.fsdecode(name)
    if not name or "/" in name or name in (".", ".."):
        raise ValueError("case name %r: one folder name (no '/', not '.' or '..')" % (name,))
    return name


GRADIENTS = ("dq", "dk", "dv", "dbeta", "dalpha", "dgain", "dS0", "dprev_key", "dhist_k", "dhist_v")


def write_result(results_dir, name, out, state=None, grads=None):
    """Write RDIR/<name>/out.npy (and state.npy) for `falcon check`; grads,
    for a set exported with --grad: {"dq": array, ...} written as dq.npy and
    so on (the names of GRADIENTS; an unknown one is refused). Arrays
    (numpy, or torch tensors: bf16 and fp16 ones widened exactly to float32)
    keep their float dtype (float16, float32 or float64), little-endian;
    integers become float64; complex, bool and other arrays are refused.
    Each file is replaced atomically (_replace_file). Without a state, a
    state.npy left there by an earlier call is removed (a symlink by that
    name too, not the file it names), so that `falcon check` does not
    judge a stale one."""
    d = os.path.join(os.fsdecode(results_dir), _plain_name(name))
    os.makedirs(d, exist_ok=True)

    def save(fname, a):
        a = as_numpy(a)
        if a.dtype.kind not in "fiu":
            raise TypeError("%s: dtype %s: a result holds real numbers" % (fname, a.dtype))
        if a.dtype.kind != "f":
            a = a.astype(np.float64)
        a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
        _replace_file(os.path.join(d, fname), lambda f: np.save(f, a))

    for g in grads or {}:
        if g not in GRADIENTS:
            raise ValueError("grads: %r is not one of %s" % (g, ", ".join(GRADIENTS)))
    save("out.npy", out)
    for g, a in (grads or {}).items():
        save(g + ".npy", a)
    if state is not None:
        save("state.npy", state)
    else:
        # A symlink goes too (the link, not what it names: falcon check
        # follows it and would judge the file it names); a directory stays.
        old = os.path.join(d, "state.npy")
        if os.path.lexists(old) and not stat.S_ISDIR(os.lstat(old).st_mode):
            os.unlink(old)
    return d


def write_manifest(results_dir, skip):
    """RDIR/manifest.json declaring skipped cases: {name: reason}. The JSON is
    made first, then the file replaced atomically: a reason that is not a
    string fails before anything is written."""
    skip = dict(skip)
    for k, why in skip.items():
        if not isinstance(k, str) or not isinstance(why, str) or not why.strip():
            raise ValueError("manifest: skip must map case names to reasons (non-empty strings): %r: %r" % (k, why))
    text = json.dumps({"skip": skip}, indent=1, sort_keys=True) + "\n"
    os.makedirs(os.fsdecode(results_dir), exist_ok=True)
    _replace_file(os.path.join(os.fsdecode(results_dir), "manifest.json"), lambda f: f.write(text.encode()))
