"""pytest helpers: one test per case of a case set, judged by `falcon check`.

    import falcon_suite.testing as ft

    @ft.parametrize(profile="quick")            # ids like falcon1-prefix-relu-strong-chunk-carried
    def test_my_kernel(case):
        out, state = my_kernel(case)            # case: what falcon_suite.load_case gives
        ft.assert_case(case, out=out, state=state, precision="fp32")

The case set is $FALCON_CASES when that names an exported set, else one
exported once per process into a temporary folder (removed at exit).
assert_case grades through libfalcon-grade (the same thresholds, units and
first bad step as `falcon check`); nothing is judged here.
"""
import atexit
import json
import os
import shutil
import tempfile

from . import cases as _cases

__all__ = ["Case", "case_set", "parametrize", "assert_case", "case_ids"]

_exported = {}    # (profile, filters) -> folder exported this process
_verified = set()  # sets verified once (realpath, index.json mtime): later checks trust them


class Case:
    """One case of a set: name, id (the readable test id), set_dir, dir and
    the index entry's fields (variant, form, align, phi, decay) at once;
    every other field of falcon_suite.load_case (q, k, v, ..., ref_out,
    state_in) loaded on first use."""

    def __init__(self, set_dir, entry, case_id):
        self.set_dir = set_dir
        self.name = entry["name"]
        self.id = case_id
        self.dir = os.path.join(set_dir, entry.get("dir", entry["name"]))
        self._entry = entry
        self._loaded = None

    def __getattr__(self, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        if attr in self._entry:
            return self._entry[attr]
        if self._loaded is None:
            self._loaded = _cases.load_case(self.dir)
        return getattr(self._loaded, attr)

    def __repr__(self):
        return "<Case %s>" % self.name


def case_ids(names):
    """Readable, unique test ids: the name without its number (q0036-), and
    -2, -3 ... after a repeated one, in the set's order."""
    seen, ids = {}, []
    for name in names:
        head, _, rest = name.partition("-")
        base = rest if rest and head[1:].isdigit() else name
        seen[base] = seen.get(base, 0) + 1
        ids.append(base if seen[base] == 1 else "%s-%d" % (base, seen[base]))
    return ids


def _export(profile, filters):
    key = (profile, tuple(sorted(filters.items())))
    if key not in _exported:
        tmp = tempfile.mkdtemp(prefix="falcon-cases-")
        atexit.register(shutil.rmtree, tmp, True)
        _cases.export_cases(os.path.join(tmp, "cases"), profile=profile, quiet=True, **filters)
        _exported[key] = os.path.join(tmp, "cases")
    return _exported[key]


def case_set(directory=None, profile="quick", **filters):
    """The cases of a set, as Case objects in the set's order: `directory`,
    else $FALCON_CASES (when no filter is given), else a set exported now
    with these options (layout="fla", variant="falcon1" ...)."""
    if directory is None and not filters:
        directory = os.environ.get("FALCON_CASES") or None
    if directory is None:
        directory = _export(profile, filters)
    directory = os.fspath(directory)
    with open(os.path.join(directory, "index.json")) as f:
        entries = json.load(f)["cases"]
    ids = case_ids([e["name"] for e in entries])
    return [Case(directory, e, i) for e, i in zip(entries, ids)]


def parametrize(directory=None, profile="quick", argname="case", **filters):
    """pytest.mark.parametrize over case_set(...), one test per case, ids
    from case_ids."""
    import pytest
    cs = case_set(directory, profile, **filters)
    return pytest.mark.parametrize(argname, cs, ids=[c.id for c in cs])


def _message(rec, result):
    """A failing case's record as one line: errors and thresholds in units
    of roundoff, and where the outputs first went wrong."""
    unit = "%s, u = %.3g" % (result.precision, result.u)
    line = "%s: out error %.4g u, threshold %.4g u" % (rec["name"], rec.get("out_u") or 0.0,
                                                       rec.get("thr_out_u") or 0.0)
    if rec.get("state_u") is not None:
        line += "; state error %.4g u, threshold %.4g u" % (rec["state_u"], rec.get("thr_state_u") or 0.0)
    line += " (%s)" % unit
    at = _cases._first_bad(rec)
    if at:
        return line + "; first bad step t = %d (batch %d, head %d)" % at
    return line + "; the state alone failed"


def assert_case(case, out, state=None, precision=None):
    """Judge one case's result as `falcon check` does; AssertionError naming
    the errors and thresholds in units of roundoff of `precision` (None: the
    set's own) and the first bad step when it fails; pytest.skip when the
    case is not judgeable in that unit. Bad input (a wrong shape, NaN) raises
    falcon_suite.CheckInputError. Returns the case's record in check's JSON.
    The set is verified against its export on the first call, trusted after."""
    rdir = tempfile.mkdtemp(prefix="falcon-result-")
    try:
        _cases.write_result(rdir, case.name, out, state)
        with open(os.path.join(case.set_dir, "index.json")) as f:
            names = [e["name"] for e in json.load(f)["cases"]]
        _cases.write_manifest(rdir, {n: "assert_case judges one case" for n in names if n != case.name})
        key = (os.path.realpath(case.set_dir), os.stat(os.path.join(case.set_dir, "index.json")).st_mtime_ns)
        result = _cases.check(case.set_dir, rdir, precision=precision, quiet=True, trust_set=key in _verified)
        _verified.add(key)
    finally:
        shutil.rmtree(rdir, ignore_errors=True)
    rec = result.case(case.name)
    if rec["status"] == "fail":
        raise AssertionError(_message(rec, result))
    if rec["status"] == "unjudgeable":
        try:
            import pytest
        except ImportError:  # outside pytest: the record says it
            return rec
        pytest.skip("%s: not judgeable in %s units (its threshold allows more than 2^-4 relative error)"
                    % (case.name, result.precision))
    return rec
