"""Tests of run() and grad() on packed batches (cu_seqlens) and grouped q/k
heads (qk_heads, head_map): docs/math.md section 13 defines both by the
plain calls they equal, so each test compares with those calls, bit for bit
(the one exception, the gradient of a shared q/k head, is a sum rounded
once: to one unit in the last place). pytest-style; also runs without
pytest (python3 python/tests/test_layouts.py). Environment: as
test_falcon.py (FALCON_LIB, the library; default build/).
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # python/: the package of this tree

import falcon_suite  # noqa: E402

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


# lengths 0, 1, 7, 0, 2 and 23: empty sequences, one step, a length that
# is no multiple of the chunk (4), one much longer than the rest
CU = [0, 0, 1, 8, 8, 10, 33]


def inputs(seed, lead, qk_lead, n, m, gain=False):
    """Random inputs exact in fp32: q, k [*qk_lead, n], the rest per value
    head ([*lead, ...])."""
    rng = np.random.default_rng(seed)
    f = lambda a: a.astype(np.float32).astype(np.float64)  # noqa: E731
    d = dict(q=f(rng.standard_normal(qk_lead + (n,))), k=f(rng.standard_normal(qk_lead + (n,))),
             v=f(rng.standard_normal(lead + (m,))), beta=f(rng.uniform(0.2, 0.9, lead)),
             alpha=f(rng.uniform(0.8, 1.0, lead)))
    d["gain"] = f(rng.uniform(0.5, 1.5, lead + (n,))) if gain else None
    return d


def steps(d, a, b):
    """Steps [a, b) of [1,T,...] inputs (a sequence of a packed batch)."""
    return {key: None if x is None else x[:, a:b] for key, x in d.items()}


# (variant, window, form, precision, chunk): a decay and prefix alignment
# in every one, the fp32 recurrent form's lazy decay, gains, a window
CONFIGS = [("falcon1", 1, "recurrent", "fp32", "auto"), ("falcon2", 1, "chunk", "fp64", 4),
           ("falcon3", 3, "chunk", "fp32", 4), ("falcon3a", 3, "recurrent", "fp64", "auto"),
           ("falcon1a", 1, "parallel", "fp32", "auto")]


def config(variant, window, form, precision, chunk):
    return dict(variant=variant, window=window, form=form, precision=precision, chunk=chunk, threads=1)


def test_packed_equals_each_sequence_alone():
    """A packed batch carried over two calls (a State: memory, previous
    keys, window history) gives each sequence's reads and state as that
    sequence run alone on a State of its own, bit for bit; an initial
    memory array [seqs,H,m,n] likewise."""
    H, n, m, seqs = 2, 5, 4, len(CU) - 1
    for cfg in CONFIGS:
        c = config(*cfg)
        gain = cfg[0] in ("falcon2", "falcon2a")
        parts = [inputs(1, (1, 33, H), (1, 33, H), n, m, gain), inputs(2, (1, 33, H), (1, 33, H), n, m, gain)]
        packed = falcon_suite.State(seqs * H, n, m, cfg[1])
        outs = [falcon_suite.run(**d, cu_seqlens=CU, state=packed, **c) for d in parts]
        contents = packed.contents()
        for i in range(seqs):
            alone = falcon_suite.State(H, n, m, cfg[1])
            for d, (out, _) in zip(parts, outs):
                o, _ = falcon_suite.run(**steps(d, CU[i], CU[i + 1]), state=alone, **c)
                assert np.array_equal(o, out[:, CU[i]:CU[i + 1]]), (cfg, i, "out")
            for key, x in alone.contents().items():
                assert np.array_equal(x, contents[key][i * H:(i + 1) * H]), (cfg, i, key)
        S0 = np.random.default_rng(3).standard_normal((seqs, H, m, n))
        out, S = falcon_suite.run(**parts[0], cu_seqlens=np.array(CU, np.int32), state=S0, **c)
        assert S.shape == (seqs, H, m, n)
        for i in range(seqs):
            o, Si = falcon_suite.run(**steps(parts[0], CU[i], CU[i + 1]), state=S0[i:i + 1], **c)
            assert np.array_equal(o, out[:, CU[i]:CU[i + 1]]) and np.array_equal(Si, S[i:i + 1]), (cfg, i)


def test_packed_one_sequence_inputs():
    """[T,D] inputs take cu_seqlens too: the memory is then [seqs,m,n]."""
    d = {key: None if x is None else x[0, :, 0] for key, x in inputs(4, (1, 33, 1), (1, 33, 1), 3, 2).items()}
    out, S = falcon_suite.run(**d, cu_seqlens=CU, precision="fp64")
    assert out.shape == (33, 2) and S.shape == (len(CU) - 1, 2, 3)
    for i in range(len(CU) - 1):
        o, Si = falcon_suite.run(**{key: None if x is None else x[CU[i]:CU[i + 1]] for key, x in d.items()},
                                 precision="fp64")
        assert np.array_equal(o, out[CU[i]:CU[i + 1]]) and np.array_equal(Si, S[i])


def repeated(x, G, head_map):
    """q or k [B,T,H_qk,n] repeated to G * H_qk heads as head_map reads them."""
    return np.repeat(x, G, axis=2) if head_map == "interleaved" else np.tile(x, (1, 1, G, 1))


def test_grouped_equals_repeated_qk():
    """q, k with qk_heads heads give the call with q and k repeated to H
    heads (numpy's repeat for "interleaved", tile for "tiled"), bit for
    bit; qk_heads inferred from q or given; with a packed batch too."""
    B, T, H, n, m = 2, 9, 6, 3, 4
    for cfg in CONFIGS:
        c = config(*cfg)
        gain = cfg[0] in ("falcon2", "falcon2a")
        for Hq in (1, 2, 3):
            G = H // Hq
            d = inputs(5, (B, T, H), (B, T, Hq), n, m, gain)
            for head_map in ("interleaved", "tiled"):
                wide = dict(d, q=repeated(d["q"], G, head_map), k=repeated(d["k"], G, head_map))
                out, S = falcon_suite.run(**d, head_map=head_map, **c)
                ref, S_ref = falcon_suite.run(**wide, **c)
                assert np.array_equal(out, ref) and np.array_equal(S, S_ref), (cfg, Hq, head_map)
                out2, _ = falcon_suite.run(**d, qk_heads=Hq, head_map=head_map, **c)
                assert np.array_equal(out2, ref)
                # packed and grouped: sequences of the first batch row
                p, pw = steps(d, 0, T), steps(wide, 0, T)
                p = {key: None if x is None else x[:1] for key, x in p.items()}
                pw = {key: None if x is None else x[:1] for key, x in pw.items()}
                out, S = falcon_suite.run(**p, cu_seqlens=[0, 4, 4, T], head_map=head_map, **c)
                ref, S_ref = falcon_suite.run(**pw, cu_seqlens=[0, 4, 4, T], **c)
                assert np.array_equal(out, ref) and np.array_equal(S, S_ref), (cfg, Hq, head_map, "packed")


def test_grouped_grad_sums_the_sharing_heads():
    """grad() of grouped inputs: dq and dk have q's shape, each the sum of
    the repeated call's dq (dk) over the value heads that share the head,
    to one unit in the last place of fp32 (the library adds in double and
    rounds once; here the sum is made in float64 and rounded); the other
    gradients equal the repeated call's bit for bit."""
    B, T, H, n, m = 2, 7, 6, 3, 4
    rng = np.random.default_rng(6)
    dO = rng.standard_normal((B, T, H, m))
    dS = rng.standard_normal((B, H, m, n))
    for cfg in [x for x in CONFIGS if x[3] == "fp32"]:
        c = config(*cfg)
        for Hq in (2, 3):
            G = H // Hq
            d = inputs(7, (B, T, H), (B, T, Hq), n, m, cfg[0] in ("falcon2", "falcon2a"))
            for head_map in ("interleaved", "tiled"):
                wide = dict(d, q=repeated(d["q"], G, head_map), k=repeated(d["k"], G, head_map))
                g = falcon_suite.grad(**d, dO=dO, dS=dS, head_map=head_map, **c)
                ref = falcon_suite.grad(**wide, dO=dO, dS=dS, **c)
                for key in ("dv", "dbeta", "dalpha", "dS0"):
                    assert np.array_equal(g[key], ref[key]), (cfg, Hq, head_map, key)
                for key in ("dq", "dk"):
                    x = ref[key].astype(np.float64)
                    if head_map == "interleaved":  # head h reads h // G: the G heads in a row
                        s = x.reshape(B, T, Hq, G, n).sum(axis=3)
                    else:  # head h reads h % Hq: every Hq-th head
                        s = x.reshape(B, T, G, Hq, n).sum(axis=2)
                    s = s.astype(np.float32)
                    assert g[key].shape == d["q"].shape and g[key].dtype == np.float32
                    ulps = np.abs(g[key].astype(np.float64) - s) / np.spacing(np.abs(s))
                    assert ulps.max() <= 1, (cfg, Hq, head_map, key, ulps.max())


def test_packed_grad_equals_each_sequence_alone():
    """grad() of a packed batch: each sequence's gradients (dS0 its heads')
    are those of the sequence alone, bit for bit."""
    H, n, m, seqs = 2, 3, 2, len(CU) - 1
    rng = np.random.default_rng(8)
    dO, dS = rng.standard_normal((1, 33, H, m)), rng.standard_normal((seqs, H, m, n))
    for cfg in [x for x in CONFIGS if x[2] != "parallel"]:
        c = config(*cfg)
        d = inputs(9, (1, 33, H), (1, 33, H), n, m, cfg[0] in ("falcon2", "falcon2a"))
        g = falcon_suite.grad(**d, dO=dO, dS=dS, cu_seqlens=CU, **c)
        assert g["dS0"].shape == (seqs, H, m, n)
        for i in range(seqs):
            a, b = CU[i], CU[i + 1]
            gi = falcon_suite.grad(**steps(d, a, b), dO=dO[:, a:b], dS=dS[i:i + 1], **c)
            for key, x in gi.items():
                whole = g[key][i:i + 1] if key == "dS0" else g[key][:, a:b]
                assert np.array_equal(x, whole), (cfg, i, key)


def _raises(call, exc, rule=None, text=""):
    """call() raises exc, whose message holds text and, for a FalconError,
    whose rule is `rule`; returns it."""
    try:
        call()
    except exc as e:
        assert text in str(e), "%s: %s" % (type(e).__name__, e)
        if rule is not None:
            assert e.rule == rule, (e.rule, rule, str(e))
        return e
    raise AssertionError("accepted: %s" % (text or rule))


def test_bad_layouts_are_refused():
    """The library's rules come back as FalconError naming the rule (and
    the offset), and leave a State as it was; Python refuses only what it
    cannot shape: offsets that are not 1-D integers, a qk_heads that is
    not q's head count, an unknown head_map name."""
    H, n, m, T = 4, 3, 2, 10
    d = inputs(10, (1, T, H), (1, T, 2), n, m)
    st = falcon_suite.State(3 * H, n, m)
    st.memory = np.ones((3 * H, m, n))
    before = st.contents()
    E = falcon_suite.FalconError
    for cu, rule, text in [([0, 5, 3, T], "cu-seqlens-range", "cu_seqlens[2] = 3 (T = 10): offsets must not decrease"),
                           ([1, 5, 7, T], "cu-seqlens-range", "cu_seqlens[0] = 1 (T = 10): the first offset must be 0"),
                           ([0, 5, 7, T - 1], "cu-seqlens-range", "cu_seqlens[3] = 9 (T = 10): the last offset must be T"),
                           ([0, 5, 11, T], "cu-seqlens-range", "cu_seqlens[2] = 11 (T = 10): an offset must lie in [0, T]"),
                           ([0, -1, 5, T], "cu-seqlens-range", "cu_seqlens[1] = -1")]:
        e = _raises(lambda: falcon_suite.run(**d, cu_seqlens=cu, state=st), E, rule, text)
        assert e.input == "cu_seqlens" and e.index == int(text.split("[")[1].split("]")[0]), (e.input, e.index)
        _raises(lambda: falcon_suite.grad(**d, cu_seqlens=cu), E, rule, text)
    for cu in ([], [0]):
        _raises(lambda: falcon_suite.run(**d, cu_seqlens=cu), E, "cu-seqlens-range", "must be >= 1")
    two = {key: None if x is None else np.concatenate([x, x]) for key, x in d.items()}
    _raises(lambda: falcon_suite.run(**two, cu_seqlens=[0, T]), E, "cu-seqlens-batch", "B = 2")
    _raises(lambda: falcon_suite.run(**d, cu_seqlens=[0, 5, T], state=st), E, "state-shape", "state is [12 heads]")
    _raises(lambda: falcon_suite.run(**dict(d, q=d["q"][:, :, :1].repeat(3, 2), k=d["k"][:, :, :1].repeat(3, 2))),
            E, "qk-heads-range", "qk_heads = 3: must divide H = 4")
    _raises(lambda: falcon_suite.run(**d, head_map=7), E, "unknown-enum", "head_map = 7")
    after = st.contents()
    assert all(np.array_equal(before[key], after[key]) for key in before), "a refused call changed the state"
    _raises(lambda: falcon_suite.run(**d, cu_seqlens=[[0, T]]), ValueError, text="cu_seqlens has shape")
    _raises(lambda: falcon_suite.run(**d, cu_seqlens=[0.0, 10.0]), TypeError, text="cu_seqlens has dtype")
    _raises(lambda: falcon_suite.run(**d, cu_seqlens=np.array([0, 2**64 - 1], np.uint64)), ValueError,
            text="does not fit in int64")
    _raises(lambda: falcon_suite.run(**d, qk_heads=4), ValueError, text="qk_heads = 4 but q has 2 heads")
    _raises(lambda: falcon_suite.run(**d, head_map="blocked"), ValueError, text="unknown head_map")
    _raises(lambda: falcon_suite.run(**dict(d, q=d["q"][:, :, :0], k=d["k"][:, :, :0])), ValueError,
            text="no heads")
    _raises(lambda: falcon_suite.run(**d, cu_seqlens=[0, 4, T], state=np.zeros((1, H, m, n))), ValueError,
            text="state has shape")


def test_state_pool():
    """run_pool on a pool of 4 slots: a packed call with slots [2, -1, 0]
    reads as run() from fresh states, stores sequences 0 and 2 into slots 2
    and 0, keeps slots 1 and 3 (never given) and the fresh sequence nowhere;
    a slot given twice raises FalconError (slot-twice), the pool kept."""
    H, n, m, P = 2, 4, 3, 4
    cu = np.array([0, 5, 5, 12], dtype=np.int64)
    d = inputs(7, (1, 12, H), (1, 12, H), n, m)
    cfg = config("falcon3", 3, "chunk", "fp32", 4)
    pool = falcon_suite.State(P * H, n, m, 3)
    out = falcon_suite.run_pool(d["q"], d["k"], d["v"], d["beta"], d["alpha"], pool=pool, slots=[2, -1, 0],
                                cu_seqlens=cu, **cfg)
    want, S = falcon_suite.run(d["q"], d["k"], d["v"], d["beta"], d["alpha"], cu_seqlens=cu, **cfg)
    assert np.array_equal(out, want)
    mem = pool.memory.reshape(P, H, m, n)
    assert np.array_equal(mem[2], S[0]) and np.array_equal(mem[0], S[2])
    assert not np.any(mem[1]) and not np.any(mem[3])
    before = pool.memory.copy()
    try:
        falcon_suite.run_pool(d["q"], d["k"], d["v"], d["beta"], d["alpha"], pool=pool, slots=[2, 2, 0],
                              cu_seqlens=cu, **cfg)
        raise AssertionError("a slot given twice was accepted")
    except falcon_suite.FalconError as e:
        assert e.rule == "slot-twice", e.rule
    assert np.array_equal(pool.memory, before)
    pool.close()


def test_torch_tensors_and_autograd():
    """Torch tensors (cu_seqlens an int32 tensor, as fla's) give run()'s
    results as tensors, and torch_run's backward fills q.grad with q's
    shape: grad()'s dq."""
    try:
        import torch
    except ImportError:
        skip("torch not installed")
    H, n, m = 4, 3, 2
    d = inputs(11, (1, 33, H), (1, 33, 2), n, m)
    t = {key: torch.from_numpy(x).requires_grad_() for key, x in d.items() if x is not None}
    cu = torch.tensor(CU, dtype=torch.int32)
    out, S = falcon_suite.run(*(t[key].detach() for key in ("q", "k", "v", "beta", "alpha")), cu_seqlens=cu,
                              head_map="tiled", precision="fp64")
    ref, S_ref = falcon_suite.run(**d, cu_seqlens=CU, head_map="tiled", precision="fp64")
    assert isinstance(out, torch.Tensor) and np.array_equal(out.numpy(), ref) and np.array_equal(S.numpy(), S_ref)
    out, S = falcon_suite.torch_run(t["q"], t["k"], t["v"], t["beta"], t["alpha"], cu_seqlens=cu,
                                    head_map="tiled", precision="fp64")
    (out.sum() + S.square().sum()).backward()
    g = falcon_suite.grad(**d, dO=np.ones(out.shape), dS=2 * S.detach().numpy(), cu_seqlens=CU,
                          head_map="tiled", precision="fp64")
    assert t["q"].grad.shape == t["q"].shape
    for key in ("q", "k", "v", "beta", "alpha"):
        assert np.array_equal(t[key].grad.numpy(), g["d" + key]), key


def _main():
    """Without pytest: run every test_* function, print a pytest-like line."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for name, fn in sorted((k, v) for k, v in globals().items() if k.startswith("test_") and callable(v)):
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


if __name__ == "__main__":
    sys.exit(_main())
