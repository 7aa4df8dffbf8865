"""Tests of the python module, pytest-style; also runs without pytest:

    python3 -m pytest -q python/tests          (or: python3 python/tests/test_falcon.py)

Environment: FALCON_BIN, the falcon command (default build/falcon of this
tree); FALCON_LIB / FALCON_GRADE_LIB, the libraries (default: build/);
FALCON_CASES, an already exported quick case set to reuse (default: the
tests export one into a temporary directory).
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import falcon_suite  # noqa: E402
import numpy_falcon  # noqa: E402

try:
    import pytest
except ImportError:
    pytest = None


class Skipped(Exception):
    pass


def skip(reason):
    if pytest is not None:
        pytest.skip(reason)
    raise Skipped(reason)


FALCON_BIN = os.environ.get("FALCON_BIN", os.path.join(ROOT, "build", "falcon"))
_tmp = None


def tmpdir():
    global _tmp
    if _tmp is None:
        _tmp = tempfile.mkdtemp(prefix="falcon-py-")
    return _tmp


def rel_err(x, ref):
    nrm = np.linalg.norm(ref)
    d = np.linalg.norm(np.asarray(x, np.float64) - ref)
    return d / nrm if nrm > 0 else d


def inputs(rng, lead, n, m, decay=True, gain=False):
    """Random inputs exact in fp32."""
    f = lambda a: a.astype(np.float32).astype(np.float64)  # noqa: E731
    d = dict(q=f(rng.standard_normal(lead + (n,))), k=f(rng.standard_normal(lead + (n,))),
             v=f(rng.standard_normal(lead + (m,))), beta=f(rng.uniform(0.2, 1.5, lead)),
             alpha=f(rng.uniform(0.6, 1.0, lead)) if decay else None)
    d["gain"] = f(rng.uniform(0.5, 1.5, lead + (n,))) if gain else None
    return d


# ---- run() and reference() ----

def test_run_matches_cli():
    """falcon_suite.run equals `falcon run` bit for bit (batch, fp32 and fp64)."""
    if not os.path.exists(FALCON_BIN):
        skip("no falcon command at %s" % FALCON_BIN)
    rng = np.random.default_rng(11)
    d = inputs(rng, (2, 17, 3), 5, 4, gain=True)
    work = tempfile.mkdtemp(dir=tmpdir())
    for key, a in d.items():
        np.save(os.path.join(work, key + ".npy"), a)
    for variant, window, form, prec in [("falcon1", 1, "recurrent", "fp32"), ("falcon2", 1, "chunk", "fp64"),
                                        ("falcon3", 3, "chunk", "fp32"), ("falcon3a", 2, "recurrent", "fp64")]:
        args = [FALCON_BIN, "run", "--variant", variant, "--form", form, "--precision", prec,
                "--window", str(window), "--chunk", "8", "--threads", "1", "--phi", "elu1"]
        for key in ("q", "k", "v", "beta", "alpha"):
            args += ["--" + key, os.path.join(work, key + ".npy")]
        if variant == "falcon2":
            args += ["--gain", os.path.join(work, "gain.npy")]
        args += ["--out", os.path.join(work, "o.npy"), "--state-out", os.path.join(work, "s.npy")]
        subprocess.run(args, check=True)
        out, S = falcon_suite.run(d["q"], d["k"], d["v"], d["beta"], d["alpha"],
                            d["gain"] if variant == "falcon2" else None, variant=variant, form=form,
                            precision=prec, window=window, chunk=8, threads=1, phi="elu1")
        assert out.dtype == (np.float32 if prec == "fp32" else np.float64)
        assert np.array_equal(out, np.load(os.path.join(work, "o.npy"))), variant
        # --state-out writes the memory in the run's precision: after an fp32
        # recurrent run the state's is a float times the lazy decay's float
        # scale (exact in float64), which it rounds once
        assert np.array_equal(S.astype(out.dtype), np.load(os.path.join(work, "s.npy"))), variant


def test_reference_matches_numpy_example():
    """The numpy example (float64) agrees with the MPFR reference to a few
    units of roundoff, state carried through two calls (prefix key and window
    history included)."""
    rng = np.random.default_rng(12)
    T, n, m, h = 14, 4, 3, 6
    worst = 0.0
    for variant, window in [("falcon1", 1), ("falcon1a", 1), ("falcon3", 3), ("falcon3a", 2)]:
        for align in ("prefix", "same"):
            for phi in ("identity", "l2norm"):
                d = inputs(rng, (T,), n, m)
                st = falcon_suite.State(1, n, m, window)
                part = lambda a, s: None if a is None else a[s]  # noqa: E731
                outs = []
                for sl in (slice(0, h), slice(h, T)):
                    o, S = falcon_suite.reference(*(part(d[x], sl) for x in ("q", "k", "v", "beta", "alpha")),
                                            variant=variant, window=window, align=align, phi=phi,
                                            state=st)
                    outs.append(o)
                c = st.contents()
                assert c["has_prev"][0] and c["hist_len"][0] == window - 1
                regression, _ = numpy_falcon.SUPPORTED[variant]
                o_np, S_np = numpy_falcon.run_head(
                    d["q"], d["k"], d["v"], d["beta"], d["alpha"], np.zeros((m, n)), None, [],
                    regression=regression, window=window, align=align, phi=phi, eps=1e-6,
                    scale=1.0, dt=np.float64)
                err = max(rel_err(o_np, np.concatenate(outs)), rel_err(S_np, S)) / 2.0 ** -53
                worst = max(worst, err)
                assert err < 64, (variant, align, phi, err)
    print("numpy example vs reference: worst %.2f u (fp64)" % worst)


def test_tf32_and_bf16_round_the_chunk_operands():
    """precision "tf32"/"bf16": float32 out, the chunk form only, and an error
    against the float64 run at the format's roundoff (not fp32's: rounded)."""
    d = inputs(np.random.default_rng(14), (64,), 16, 8)
    args = [d[x] for x in ("q", "k", "v", "beta", "alpha")]
    ref, _ = falcon_suite.run(*args, variant="falcon1", form="chunk", chunk=16, precision="fp64")
    for prec, u in (("tf32", 2.0 ** -11), ("bf16", 2.0 ** -8)):
        o, _ = falcon_suite.run(*args, variant="falcon1", form="chunk", chunk=16, precision=prec)
        assert o.dtype == np.float32
        err = rel_err(o, ref) / u
        assert 0.05 < err < 20, (prec, err)
        try:
            falcon_suite.run(*args, variant="falcon1", form="recurrent", precision=prec)
        except falcon_suite.FalconError as e:
            assert "only the chunk form" in str(e), str(e)
        else:
            raise AssertionError("%s ran the recurrent form" % prec)


def test_bad_input_raises_with_the_library_message():
    d = inputs(np.random.default_rng(13), (5,), 3, 2)
    try:
        falcon_suite.run(d["q"], d["k"], d["v"], d["beta"] * 0 + 3.0, variant="falcon1")
    except falcon_suite.FalconError as e:
        assert "beta" in str(e) and e.status != 0, str(e)
        # the library's structured error, as fields: the input, the rule, the first element, its step and head
        assert (e.input, e.rule, e.index, e.t, e.head) == ("beta", "beta-range", 0, 0, 0), vars(e)
    else:
        raise AssertionError("beta = 3 was accepted")


def test_torch_tensors_in_and_out():
    """torch tensors go in (bf16 and fp16 widened exactly to float32) and come
    out as tensors, equal bit for bit to the run of the same values as numpy
    arrays; write_result takes them too; a library error is a FalconError
    carrying the library's own message."""
    try:
        import torch
    except ImportError:
        skip("torch not installed")
    d = inputs(np.random.default_rng(21), (2, 9, 3), 4, 5)
    names = ("q", "k", "v", "beta", "alpha")
    for tdt in (torch.float32, torch.bfloat16, torch.float16):
        t = [torch.from_numpy(d[x]).to(tdt) for x in names]
        held = [x.double().numpy() for x in t]  # the values the tensors hold
        for prec in ("fp32", "fp64"):
            out, S = falcon_suite.run(*t, variant="falcon1", precision=prec)
            want_out, want_S = falcon_suite.run(*held, variant="falcon1", precision=prec)
            assert isinstance(out, torch.Tensor) and isinstance(S, torch.Tensor), (tdt, prec)
            assert out.dtype == (torch.float32 if prec == "fp32" else torch.float64), (tdt, out.dtype)
            assert np.array_equal(out.numpy(), want_out) and np.array_equal(S.numpy(), want_S), (tdt, prec)
    r = os.path.join(tmpdir(), "torch-results")
    falcon_suite.write_result(r, "c", t[2].to(torch.bfloat16), state=S)
    saved = np.load(os.path.join(r, "c", "out.npy"))
    assert saved.dtype == np.float32 and np.array_equal(saved, t[2].to(torch.bfloat16).float().numpy())
    try:
        falcon_suite.run(*t[:3], t[3] * 0 + 3.0, variant="falcon1")
    except falcon_suite.FalconError as e:
        lib_msg = falcon_suite._lib.last_error()
        assert lib_msg and lib_msg in str(e) and "beta" in str(e), (str(e), lib_msg)
    else:
        raise AssertionError("beta = 3 was accepted from a tensor")


def test_an_optional_library_is_attached_when_found():
    """A library of LIBRARIES with an attach function (the MPFR reference's)
    is loaded with libfalcon and its function called; one without that
    function, or a FALCON_REF_LIB naming nothing, is a FalconError."""
    import shutil as sh
    cc = sh.which(os.environ.get("CC", "cc"))
    if cc is None:
        skip("no C compiler")
    work = tempfile.mkdtemp(dir=tmpdir())
    probe = "import falcon_suite; falcon_suite.lib_path(); print(falcon_suite.library_paths())"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    marker = os.path.join(work, "attached")
    for name, body in (("good", 'void falcon_reference_attach(void) { fclose(fopen("%s", "w")); }' % marker),
                       ("bad", "void other(void) {}")):
        src, lib = os.path.join(work, name + ".c"), os.path.join(work, "libref-%s.so" % name)
        with open(src, "w") as f:
            f.write("#include <stdio.h>\n" + body + "\n")
        subprocess.run([cc, "-shared", "-fPIC", "-o", lib, src], check=True)
        r = subprocess.run([sys.executable, "-c", probe], env=dict(env, FALCON_REF_LIB=lib),
                           capture_output=True, text=True)
        if name == "good":
            assert r.returncode == 0 and lib in r.stdout and os.path.exists(marker), (r.stdout, r.stderr)
        else:
            assert r.returncode != 0 and "has no function falcon_reference_attach" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       env=dict(env, FALCON_REF_LIB=os.path.join(work, "absent.so")))
    assert r.returncode != 0 and "absent.so: no such file" in r.stderr, (r.stdout, r.stderr)


def test_a_memory_beyond_float32_is_refused():
    d = inputs(np.random.default_rng(14), (5,), 3, 2)
    st = falcon_suite.State(1, 3, 2)
    S = np.zeros((1, 2, 3))
    S[0, 1, 2] = 1e39
    st.memory = S
    st.check("fp64")
    for call in (lambda: st.check("fp32"), lambda: falcon_suite.run(d["q"], d["k"], d["v"], d["beta"], state=st)):
        try:
            call()
        except falcon_suite.FalconError as e:
            assert "state S: element 5 (head 0) = 1e+39 does not fit in float32" in str(e), str(e)
        else:
            raise AssertionError("a memory of 1e39 was accepted for fp32")
    assert st.memory[0, 1, 2] == 1e39


def _raises(call, exc, text=""):
    try:
        call()
    except exc as e:
        assert text in str(e), "%s: %s" % (type(e).__name__, e)
        return
    raise AssertionError("accepted: %s" % text)


def test_shapes_dtypes_and_integers_are_refused_not_reinterpreted():
    """A transposed or flat state, complex, bool or string inputs, and
    integers that are floats, bools or beyond their C field are errors; none
    is converted into a different run."""
    d = inputs(np.random.default_rng(15), (6,), 3, 2)
    a = (d["q"], d["k"], d["v"], d["beta"])
    S = np.random.default_rng(16).standard_normal((2, 3))
    falcon_suite.run(*a, state=S)  # [m, n]: the one shape for one sequence
    for bad in (S.T, S.reshape(-1), S[None, None]):
        _raises(lambda: falcon_suite.run(*a, state=bad), ValueError, "state has shape")
    st = falcon_suite.State(1, 3, 2)
    _raises(lambda: setattr(st, "memory", np.zeros((3, 2))), ValueError, "memory has shape")
    _raises(lambda: setattr(st, "memory", np.zeros(6)), ValueError, "memory has shape")
    st.memory = np.zeros((2, 3))
    st.close()
    _raises(lambda: falcon_suite.run(d["q"] + 1j, *a[1:]), TypeError, "q has dtype complex")
    _raises(lambda: falcon_suite.run(*a[:3], np.ones(6, bool)), TypeError, "beta has dtype bool")
    _raises(lambda: falcon_suite.run(*a[:3], np.array(["0.5"] * 6)), TypeError, "beta has dtype")
    _raises(lambda: falcon_suite.run(*a, variant="falcon3", window=3.7), TypeError, "window must be an integer")
    _raises(lambda: falcon_suite.run(*a, variant="falcon3", window=2**64 + 3), ValueError, "window")
    _raises(lambda: falcon_suite.run(*a, variant=2**32 + 2), ValueError, "variant")
    _raises(lambda: falcon_suite.run(*a, variant=True), TypeError, "variant must be an integer")
    _raises(lambda: falcon_suite.run(*a, threads=2**32 + 1), ValueError, "threads")
    _raises(lambda: falcon_suite.run(*a, form="chunk", chunk=0), ValueError, "chunk")
    _raises(lambda: falcon_suite.State(2**64 + 1, 3, 2), ValueError, "heads")
    q = d["q"].copy()
    q[0, 2] = 1e39
    _raises(lambda: falcon_suite.run(q, *a[1:]), falcon_suite.FalconError, "q: element [0, 2] = 1e+39 does not fit in float32")


def test_results_and_manifests_are_replaced_whole():
    """write_result and write_manifest replace their files atomically: a
    failure keeps the old file, a symlink to a device is refused, a name
    cannot leave the results directory, and a stale state goes."""
    r = tempfile.mkdtemp(dir=tmpdir())
    falcon_suite.write_manifest(r, {"a": "old reason"})
    old = open(os.path.join(r, "manifest.json")).read()
    _raises(lambda: falcon_suite.write_manifest(r, {"b": "x", "c": np.float32(1)}), ValueError, "manifest")
    assert open(os.path.join(r, "manifest.json")).read() == old
    falcon_suite.write_result(r, "c", np.arange(10.0), state=np.ones(3))
    assert os.path.exists(os.path.join(r, "c", "state.npy"))
    falcon_suite.write_result(r, "c", np.arange(10.0))
    assert not os.path.exists(os.path.join(r, "c", "state.npy")), "a stale state.npy is left"
    kept = os.path.join(r, "kept-state.npy")
    np.save(kept, np.ones(3))
    os.symlink(kept, os.path.join(r, "c", "state.npy"))
    falcon_suite.write_result(r, "c", np.arange(10.0))
    assert not os.path.lexists(os.path.join(r, "c", "state.npy")), "a stale state.npy symlink is left"
    assert np.array_equal(np.load(kept), np.ones(3)), "the file a stale link named was touched"
    _raises(lambda: falcon_suite.write_result(r, "c", np.arange(3) + 1j), TypeError, "dtype complex")
    assert np.array_equal(np.load(os.path.join(r, "c", "out.npy")), np.arange(10.0))
    os.makedirs(os.path.join(r, "d"))
    os.symlink("/dev/null", os.path.join(r, "d", "out.npy"))
    _raises(lambda: falcon_suite.write_result(r, "d", np.zeros(3)), falcon_suite.FalconError, "not a regular file")
    assert os.path.islink(os.path.join(r, "d", "out.npy"))
    for name in ("../escaped", ".", ""):
        _raises(lambda: falcon_suite.write_result(r, name, np.zeros(3)), ValueError, "one folder name")
    assert not os.path.exists(os.path.join(os.path.dirname(r), "escaped"))
    assert not [f for _, _, fs in os.walk(r) for f in fs if ".tmp-" in f], "a temporary is left"


# ---- export, check ----

_cases = None


def cases_dir():
    """The quick case set: $FALCON_CASES, else exported here once."""
    global _cases
    if _cases is None:
        if os.environ.get("FALCON_CASES"):
            _cases = os.environ["FALCON_CASES"]
        else:
            _cases = os.path.join(tmpdir(), "cases")
            index = falcon_suite.export_cases(_cases, profile="quick", quiet=True)
            assert index["format"] == "falcon-cases" and index["count"] == len(index["cases"])
    return _cases


def numpy_results(dtype, bug=None):
    rdir = tempfile.mkdtemp(dir=tmpdir())
    args = [cases_dir(), rdir, "--dtype", dtype] + (["--bug", bug] if bug else [])
    assert numpy_falcon.main(args) == 0
    return rdir


def test_load_case_reads_every_case():
    import json
    with open(os.path.join(cases_dir(), "index.json")) as f:
        index = json.load(f)
    for entry in index["cases"]:
        c = falcon_suite.load_case(os.path.join(cases_dir(), entry.get("dir", entry["name"])))
        assert c.name == entry["name"] and c.q.ndim == 4
        assert list(c.ref_out.shape) == list(c.expected["out"])
        assert c.state_in["S"].shape[0] == getattr(c, "seqs", c.B) * c.H  # packed: a row per sequence


def test_numpy_example_passes_fp32():
    result = falcon_suite.check(cases_dir(), numpy_results("float32"), precision="fp32", quiet=True)
    assert result.passed, result.summary()
    assert result.failed == [] and len(result.passed_cases) > 0


def test_numpy_example_passes_fp64():
    result = falcon_suite.check(cases_dir(), numpy_results("float64"), precision="fp64", quiet=True)
    assert result.passed, result.summary()


def test_decay_after_write_fails_on_decayed_cases_only():
    result = falcon_suite.check(cases_dir(), numpy_results("float32", "decay-after-write"), quiet=True)
    assert not result.passed and result.failed
    for name in result.failed:
        assert result.case(name)["decay"] != "none", name


def test_testing_helpers_ids_and_assert_case():
    """falcon_suite.testing: readable unique ids (the name without its
    number); assert_case passes the numpy example and fails its wrong twin
    with check's own numbers: the errors and thresholds in units of
    roundoff and the first bad step."""
    import falcon_suite.testing as ft
    cs = ft.case_set(cases_dir())
    ids = [c.id for c in cs]
    assert len(set(ids)) == len(ids) and not any(i[:2] == "q0" for i in ids), ids[:5]
    assert "falcon1-prefix-relu-strong-chunk-carried" in ids, ids
    by_id = dict(zip(ids, cs))
    assert ft.case_ids(["q0001-a", "q0002-a", "q0003-b", "plain"]) == ["a", "a-2", "b", "plain"]
    whole = falcon_suite.check(cases_dir(), numpy_results("float32", "decay-after-write"), quiet=True)
    name = whole.failed[0]
    c = next(c for c in cs if c.name == name)
    good = numpy_falcon.run_case(c, np.float32)
    assert ft.assert_case(c, out=good[0], state=good[1])["status"] == "pass"
    out, state = numpy_falcon.run_case(c, np.float32, bug="decay-after-write")
    try:
        ft.assert_case(c, out=out, state=state)
    except AssertionError as e:
        rec, msg = whole.case(name), str(e)
        want = ["%s: out error %.4g u, threshold %.4g u" % (name, rec["out_u"], rec["thr_out_u"]),
                "(%s, u = " % whole.precision]
        at = whole.first_bad[name]
        want.append("first bad step t = %d (batch %d, head %d)" % at if at else "the state alone failed")
        assert all(w in msg for w in want), (msg, want)
    else:
        raise AssertionError("assert_case passed the wrong twin on %s" % name)
    assert by_id[c.id] is c


def test_check_defaults_to_the_sets_precision():
    """As the command: with no precision given, an fp64 set is judged in fp64
    units, where float32 results fail (judged in fp32 units they pass)."""
    cdir = os.path.join(tmpdir(), "cases-fp64")
    # identity phi: the l2norm cases' fp64 subnormal keys are 0 in float32
    falcon_suite.export_cases(cdir, profile="quick", quiet=True, precision="fp64", variant="falcon1", form="recurrent",
                        phi="identity")
    rdir = tempfile.mkdtemp(dir=tmpdir())
    assert numpy_falcon.main([cdir, rdir, "--dtype", "float32"]) == 0
    result = falcon_suite.check(cdir, rdir, quiet=True)
    assert result.precision == "fp64" and not result.passed and result.failed, result
    assert falcon_suite.check(cdir, rdir, precision="fp32", quiet=True).passed


def test_check_options_reach_the_command():
    """require_state: a missing state.npy is bad input; max_skipped: too many
    skips fail; unjudgeable cases are listed, never among the passed."""
    import json
    rdir = numpy_results("float32")
    names = sorted(d for d in os.listdir(rdir) if os.path.isdir(os.path.join(rdir, d)))
    os.unlink(os.path.join(rdir, names[0], "state.npy"))
    assert falcon_suite.check(cases_dir(), rdir, quiet=True).case(names[0])["state_given"] is False
    _raises(lambda: falcon_suite.check(cases_dir(), rdir, quiet=True, require_state=True), falcon_suite.CheckInputError,
            "--require-state")
    manifest = os.path.join(rdir, "manifest.json")
    skip = json.load(open(manifest))["skip"] if os.path.exists(manifest) else {}
    shutil.rmtree(os.path.join(rdir, names[1]))
    skip[names[1]] = "not done"
    falcon_suite.write_manifest(rdir, skip)
    assert falcon_suite.check(cases_dir(), rdir, quiet=True, max_skipped=0.5).passed
    assert not falcon_suite.check(cases_dir(), rdir, quiet=True, max_skipped=0.0).passed
    result = falcon_suite.check(cases_dir(), rdir, precision="fp16", quiet=True)
    assert result.passed and result.unjudgeable and not set(result.unjudgeable) & set(result.passed_cases)


def test_check_says_where_a_case_failed():
    """A result 1% off from step 17 of batch row 0, head 1 on: first_bad
    names (17, 0, 1); a wrong state alone: None (state only)."""
    import json
    rdir = numpy_results("float32")
    with open(os.path.join(cases_dir(), "index.json")) as f:
        rows = json.load(f)["cases"]
    name = None
    for row in rows:
        with open(os.path.join(cases_dir(), row["dir"], "case.json")) as f:
            meta = json.load(f)
        if meta["T"] > 17 and meta["H"] > 1 and os.path.isdir(os.path.join(rdir, row["name"])):
            name = row["name"]
            break
    assert name, "no case with T > 17 and H > 1"
    out = os.path.join(rdir, name, "out.npy")
    orig = np.load(out)
    a = orig.copy()
    a[0, 17:, 1] *= np.float32(1.01)
    np.save(out, a)
    result = falcon_suite.check(cases_dir(), rdir, quiet=True)
    assert result.failed == [name] and result.first_bad == {name: (17, 0, 1)}, (result.failed, result.first_bad)
    assert "first bad step t = 17 (batch 0, head 1)" in result.summary(), result.summary()
    np.save(out, orig)
    state = os.path.join(rdir, name, "state.npy")
    np.save(state, np.load(state) * np.float32(1.001))
    result = falcon_suite.check(cases_dir(), rdir, quiet=True)
    assert result.failed == [name] and result.first_bad == {name: None}, result.first_bad
    assert result.case(name)["state_only"] is True and "state only" in result.summary()


def test_missing_result_is_bad_input():
    rdir = numpy_results("float32")
    victim = sorted(d for d in os.listdir(rdir) if os.path.isdir(os.path.join(rdir, d)))[0]
    shutil.rmtree(os.path.join(rdir, victim))
    try:
        falcon_suite.check(cases_dir(), rdir, quiet=True)
    except falcon_suite.CheckInputError as e:
        assert e.status == 2 and victim in str(e), str(e)
    else:
        raise AssertionError("a missing result was not reported as bad input")


def test_edited_set_is_refused_unless_trusted():
    """A raised threshold is refused (status 2, naming the case and its
    case.json); trust_set=True judges the set as it is, and says so."""
    import json
    cdir = os.path.join(tmpdir(), "cases-edited")
    shutil.copytree(cases_dir(), cdir)
    rdir = numpy_results("float32")
    with open(os.path.join(cdir, "index.json")) as f:
        name = json.load(f)["cases"][0]["dir"]
    path = os.path.join(cdir, name, "case.json")
    with open(path) as f:
        meta = json.load(f)
    meta["thresholds"]["out_u"] *= 1000
    with open(path, "w") as f:
        json.dump(meta, f, indent=1)
    try:
        falcon_suite.check(cdir, rdir, quiet=True)
    except falcon_suite.CheckInputError as e:
        assert e.status == 2 and name in str(e) and "case.json" in str(e) and "--trust-set" in str(e), str(e)
    else:
        raise AssertionError("an edited threshold was accepted")
    result = falcon_suite.check(cdir, rdir, quiet=True, trust_set=True)
    assert result.passed and "NOT verified" in result.report, result.report
    assert "set %s: verified" % cases_dir() in falcon_suite.check(cases_dir(), rdir, quiet=True).report


def test_torch_chunk_example_passes():
    try:
        import torch  # noqa: F401
    except ImportError:
        skip("torch not installed")
    import torch_falcon_chunk
    cdir = os.path.join(tmpdir(), "cases-fla")
    falcon_suite.export_cases(cdir, profile="quick", quiet=True, layout="fla")
    rdir = tempfile.mkdtemp(dir=tmpdir())
    assert torch_falcon_chunk.main([cdir, rdir]) == 0
    result = falcon_suite.check(cdir, rdir, precision="fp32", quiet=True)
    assert result.passed, result.summary()


# ---- grad() and torch_run() ----

def _loss(out, S, dO, dS):
    return float(np.sum(out.astype(np.float64) * dO) + np.sum(S * dS))


def test_grad_matches_the_reference_and_finite_differences():
    """grad() in fp64 equals the MPFR backend's gradients to a few units of
    roundoff, and its directional derivative matches central differences of
    run() (a seeded bug in any gradient moves one of the two)."""
    rng = np.random.default_rng(31)
    d = inputs(rng, (2, 7, 2), 4, 3, gain=True)
    dO = rng.standard_normal((2, 7, 2, 3))
    dS = rng.standard_normal((2, 2, 3, 4))
    kw = dict(variant="falcon2", precision="fp64", align="same")
    g = falcon_suite.grad(**d, dO=dO, dS=dS, **kw)
    ref = falcon_suite.grad(**d, dO=dO, dS=dS, backend="mpfr", **kw)
    for name in ("dq", "dk", "dv", "dbeta", "dalpha", "dgain", "dS0"):
        err = np.linalg.norm(g[name] - ref[name]) / max(np.linalg.norm(ref[name]), 1e-300)
        assert err < 1e-12, (name, err)
    h = 1e-6
    for name in ("q", "k", "v", "beta", "alpha", "gain"):
        direction = rng.standard_normal(d[name].shape) * (0.1 if name in ("beta", "alpha") else 1)
        plus, minus = dict(d), dict(d)
        plus[name] = d[name] + h * direction
        minus[name] = d[name] - h * direction
        fd = (_loss(*falcon_suite.run(**plus, **kw), dO, dS) - _loss(*falcon_suite.run(**minus, **kw), dO, dS)) / (2 * h)
        an = float(np.sum(g["d" + name] * direction))
        assert abs(fd - an) <= 1e-6 * max(1.0, abs(an)), (name, fd, an)


def test_grad_refuses_bad_cotangents():
    """A NaN in dO is refused with the library's structured error, naming dO."""
    d = inputs(np.random.default_rng(5), (6,), 3, 2)
    dO = np.zeros((6, 2))
    dO[3, 1] = np.nan
    try:
        falcon_suite.grad(**d, dO=dO, variant="falcon1")
    except falcon_suite.FalconError as e:
        assert e.input == "dO" and e.rule == "finite", (e.input, e.rule, str(e))
    else:
        raise AssertionError("a NaN cotangent was accepted")


def test_torch_backward_runs_through_the_library():
    """torch_run's backward() fills every input's .grad with grad()'s values."""
    try:
        import torch
    except ImportError:
        skip("torch not installed")
    d = inputs(np.random.default_rng(8), (9,), 4, 3)
    t = {k: torch.tensor(v, requires_grad=True) for k, v in d.items() if v is not None}
    S0 = torch.zeros((3, 4), dtype=torch.float64, requires_grad=True)
    out, S = falcon_suite.torch_run(t["q"], t["k"], t["v"], t["beta"], t["alpha"], None, S0,
                                    variant="falcon1", precision="fp64")
    dO, dS = torch.ones_like(out), torch.full_like(S, 0.5)
    (out * dO).sum().add((S * dS).sum()).backward()
    g = falcon_suite.grad(**d, dO=dO.numpy(), dS=dS.numpy(), variant="falcon1", precision="fp64")
    for name in ("q", "k", "v", "beta", "alpha"):
        assert np.array_equal(t[name].grad.numpy(), g["d" + name]), name
    assert np.array_equal(S0.grad.numpy(), g["dS0"])


def _main():
    """Without pytest: run every test_* function, print a pytest-like line."""
    tests = [(k, v) for k, v in sorted(globals().items()) if k.startswith("test_") and callable(v)]
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for name, fn in tests:
        try:
            fn()
        except Skipped as e:
            counts["skipped"] += 1
            print("SKIP %s: %s" % (name, e))
        except Exception as e:  # an assertion or an error: both fail the test
            counts["failed"] += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        else:
            counts["passed"] += 1
            print("ok   %s" % name)
    print("%(passed)d passed, %(failed)d failed, %(skipped)d skipped" % counts)
    return 1 if counts["failed"] else 0


def teardown_module(module=None):
    if _tmp is not None:
        shutil.rmtree(_tmp, ignore_errors=True)


if __name__ == "__main__":
    rc = _main()
    teardown_module()
    sys.exit(rc)
