#!/usr/bin/env python3
"""Peers: libfalcon's Falcon-1 against other implementations of the same
recurrence (PyTorch chunk-form code; ggml's op, given a prebuilt ggml) on
the same inputs, in one process, on the CPU.

    python3 bench/peers.py                         # T = 4096, 8 heads, n = m = 128, 1 and 2 threads
    python3 bench/peers.py --json report/peers.json
    python3 bench/peers.py --quick                 # a small case: the harness and the agreement only

The peers (computed in float32, decay exponents as PyTorch code keeps them):
  naive-chunk   the naive chunk algorithm of the PyTorch linear-attention
                libraries (the reference code beside their Triton kernels,
                which users run on a CPU): per chunk of 64 steps the
                inverse of the unit lower-triangular system is built row by
                row by a Python loop over all chunks at once (a broadcast
                product and a sum per row), then the WY products, then a
                Python loop over the chunks carrying the state. Written here
                from the algorithm, with the same tensor operations in the
                same order, so that it costs what that code costs.
  torch-chunk   examples/torch_falcon_chunk.py: the chunk form written in
                PyTorch with a triangular solve per chunk (torch's own
                solver and GEMMs), the plain-matmul script a user would write.
  ggml-recurrent  with --ggml DIR: ggml's CPU gated_delta_net op (the
                recurrence llama.cpp runs for gated DeltaNet layers) from a
                prebuilt ggml in DIR (libggml-base.so and libggml-cpu-*.so,
                as the npm package @node-llama-cpp/linux-x64 ships them),
                called through ctypes (class Ggml). Not measured without it.
Falcon-1 with a decay and same-step alignment is the gated delta rule with
beta_t = eta_t = beta'_t / (eps + |k_t|^2) and g_t = log alpha_t: every
implementation gets the same inputs (the benchmark's distribution: uniform
q, k, v in [-1, 1), beta' in [0.5, 1), alpha in [0.99, 1), seeded) and its
outputs must agree with libfalcon's chunk form to 1e-4 of their largest
magnitude (they agree to 2e-7 to 8e-7 here; a missing decay differs by
1e-1, a missing normaliser by 3e9, the other alignment by 1.1-1.5), else the
run fails (exit 1): a peer that does other work has no speed to compare.

Timing: each thread count P runs in child processes whose environment sets
OMP_NUM_THREADS (torch's threads), OPENBLAS_NUM_THREADS and MKL_NUM_THREADS
(the BLAS's) before numpy and torch load: torch.set_num_threads alone
leaves OpenBLAS's own threads running, and a "1 thread" torch GEMM then
uses every core. At P = 1 torch and its BLAS get one thread each; at P > 1
the children run torch and BLAS at (P, 1), (1, P) and (P, P) threads and
each implementation is taken at its fastest (libfalcon always at P
threads of its own). One warm-up call each, then rounds that call every
implementation once in turn; the table gives medians, and a speed-up is
the ratio of two of them.
`gflops_6nm` counts the least work any form does, 6 n m flops a token and
head (the memory's product with the key and with the query, and its
rank-one update), over the call's time.

--backward: the gradients instead (docs/math.md section 12), one head:
libfalcon's falcon_backward (falcon_suite.grad, chunk form, C = 64, given
dO, uniform in [-1, 1) and seeded) against torch-autograd-chunk, torch's
autograd through examples/torch_falcon_chunk.py (its forward and backward:
what a user pays for the same gradients; libfalcon's backward computes its
forward quantities again too). dq, dk, dv and dbeta must agree to 1e-4 of
each one's largest magnitude (2e-7 to 8e-7 here at T = 4096, n = m = 128);
the goal is 3x torch's autograd at 1 and 2 threads.

Exit status: 0 measured, 1 a peer disagreed, 2 bad usage, 77 torch or
libfalcon missing ("skipped: ..."). --json FILE writes the results
through a temporary renamed onto FILE at the end: a failed or stopped run
leaves an earlier FILE as it was.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, os.pardir)
TOLERANCE = 1e-4
PEERS = ("naive-chunk", "torch-chunk", "ggml-recurrent")
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def inputs(T, H, n, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    f = np.float32
    q = rng.uniform(-1, 1, (1, T, H, n)).astype(f)
    k = rng.uniform(-1, 1, (1, T, H, n)).astype(f)
    v = rng.uniform(-1, 1, (1, T, H, n)).astype(f)
    beta = rng.uniform(0.5, 1, (1, T, H)).astype(f)
    alpha = rng.uniform(0.99, 1, (1, T, H)).astype(f)
    return q, k, v, beta, alpha


def naive_chunk(q, k, v, g, b, C=64):
    """The naive chunk algorithm (see the module's text). q, k, v
    [B,T,H,D] float32, g (log decay) and b (the rule's beta) [B,T,H]; T a
    multiple of C. Returns the outputs [B,T,H,V] and the state [B,H,K,V]."""
    import torch
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))           # [B,H,T,D]
    g, b = g.transpose(1, 2), b.transpose(1, 2)                 # [B,H,T]
    B, H, T, K = q.shape
    V, N = v.shape[-1], T // C
    q, k, v = (x.reshape(B, H, N, C, x.shape[-1]) for x in (q, k, v))
    b = b.reshape(B, H, N, C, 1)
    gc = g.reshape(B, H, N, C).cumsum(-1)                       # decay from the chunk's start
    kb, vb = k * b, v * b
    decay = (gc.unsqueeze(-1) - gc.unsqueeze(-2)).tril().exp().tril()
    upper_or_diag = torch.triu(torch.ones(C, C, dtype=torch.bool), 0)
    t = -((kb @ k.transpose(-1, -2)) * decay).masked_fill(upper_or_diag, 0)
    for i in range(1, C):                                       # row i of the inverse, from rows < i
        t[..., i, :i] = t[..., i, :i].clone() + (t[..., i, :i, None].clone() * t[..., :i, :i].clone()).sum(-2)
    t = t + torch.eye(C)
    u = t @ vb
    w = t @ (kb * gc.exp()[..., None])
    S = q.new_zeros(B, H, K, V)
    o = torch.zeros_like(v)
    upper = torch.triu(torch.ones(C, C, dtype=torch.bool), 1)
    for c in range(N):
        qc, kc, gcc = q[:, :, c], k[:, :, c], gc[:, :, c]
        inner = (qc @ kc.transpose(-1, -2) * decay[:, :, c]).masked_fill_(upper, 0)
        resid = u[:, :, c] - w[:, :, c] @ S
        o[:, :, c] = (qc * gcc[..., None].exp()) @ S + inner @ resid
        S = S * gcc[..., -1, None, None].exp() + (kc * (gcc[..., -1, None] - gcc).exp()[..., None]).transpose(-1, -2) @ resid
    return o.reshape(B, H, T, V).transpose(1, 2), S


class Ggml:
    """ggml's CPU gated_delta_net op (llama.cpp's gated DeltaNet, a
    recurrence), through ctypes on a prebuilt ggml: DIR holds
    libggml-base.so and one or more libggml-cpu-*.so (the CPU variant with
    the highest ggml_backend_score is taken, as ggml's loader does). The op
    computes, per head, S = exp(g) S, d = beta (v - S^T k), S += k d^T,
    o = S^T q / sqrt(n), with the state stored as libfalcon's S [m][n]:
    Falcon-1 with a decay and same-step alignment once beta = eta, with its
    outputs times sqrt(n). The graph is built once; a call is one
    ggml_graph_compute_with_ctx on P threads of ggml's own."""

    def __init__(self, d, q, k, v, g, b, threads, calls):
        import ctypes
        import glob
        import numpy as np
        P = ctypes.c_void_p
        self.threads = threads
        base = ctypes.CDLL(os.path.join(d, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
        best = None
        for path in sorted(glob.glob(os.path.join(d, "libggml-cpu*.so"))):
            try:
                lib = ctypes.CDLL(path)
                lib.ggml_backend_score.restype = ctypes.c_int
                score = lib.ggml_backend_score()
            except (OSError, AttributeError):
                continue
            if score > 0 and (best is None or score > best[0]):
                best = (score, path, lib)
        if best is None:
            raise OSError("no usable libggml-cpu*.so in %s" % d)
        self.variant = os.path.basename(best[1])
        cpu = best[2]

        class Params(ctypes.Structure):
            _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]
        base.ggml_init.restype, base.ggml_init.argtypes = P, [Params]
        base.ggml_new_tensor_4d.restype = P
        base.ggml_new_tensor_4d.argtypes = [P, ctypes.c_int] + [ctypes.c_int64] * 4
        base.ggml_gated_delta_net.restype, base.ggml_gated_delta_net.argtypes = P, [P] * 7
        base.ggml_new_graph.restype, base.ggml_new_graph.argtypes = P, [P]
        base.ggml_build_forward_expand.argtypes = [P, P]
        base.ggml_get_data.restype, base.ggml_get_data.argtypes = P, [P]
        base.ggml_free.argtypes = [P]
        cpu.ggml_cpu_init()
        cpu.ggml_graph_compute_with_ctx.restype = ctypes.c_int
        cpu.ggml_graph_compute_with_ctx.argtypes = [P, P, ctypes.c_int]
        _, T, H, n = q.shape
        m = v.shape[-1]
        # the tensors, the result (outputs and state), and room for each
        # call's work buffer, which ggml_graph_compute_with_ctx takes anew
        # from the context (66 KiB a call measured, n = m = 128, 1 thread)
        size = 2 * q.nbytes + 2 * v.nbytes + 2 * g.nbytes + 2 * 4 * H * n * m + (64 << 20) + (calls << 20)
        self.ctx = base.ggml_init(Params(size, None, False))
        if not self.ctx:
            raise OSError("ggml_init failed")
        self.base, self.cpu = base, cpu

        def tensor(arr, ne):
            t = base.ggml_new_tensor_4d(self.ctx, 0, *ne)  # GGML_TYPE_F32
            src = np.ascontiguousarray(arr, np.float32)  # alive until the copy is made
            ctypes.memmove(base.ggml_get_data(t), src.ctypes.data, src.nbytes)
            return t
        args = [tensor(q, (n, H, T, 1)), tensor(k, (n, H, T, 1)), tensor(v, (m, H, T, 1)),
                tensor(g, (1, H, T, 1)), tensor(b, (1, H, T, 1)), tensor(np.zeros(H * m * n, np.float32),
                                                                          (n, m, H, 1))]
        res = base.ggml_gated_delta_net(self.ctx, *args)
        if not res:
            raise OSError("ggml_gated_delta_net refused the shapes")
        self.graph = base.ggml_new_graph(self.ctx)
        base.ggml_build_forward_expand(self.graph, res)
        buf = ctypes.cast(base.ggml_get_data(res), ctypes.POINTER(ctypes.c_float))
        self.out = np.ctypeslib.as_array(buf, shape=(T * H * m,)).reshape(1, T, H, m)
        self.scale = float(np.sqrt(n))

    def __call__(self):
        if self.cpu.ggml_graph_compute_with_ctx(self.ctx, self.graph, self.threads) != 0:
            raise RuntimeError("ggml_graph_compute_with_ctx failed")
        return self.out


def backward_impls(a, th, q, k, v, beta, alpha, eps):
    """--backward: (name, call) pairs, each call giving dq, dk, dv, dbeta."""
    import numpy as np
    import torch
    import falcon_suite
    from torch_falcon_chunk import chunk_falcon1
    T, H, n = q.shape[1], q.shape[2], q.shape[3]
    dO = np.random.default_rng(a.seed + 1).uniform(-1, 1, q.shape[:3] + (v.shape[3],)).astype(np.float32)
    log_alpha = torch.from_numpy(np.log(alpha.astype(np.float64)))
    zero_h, no_prev, has_prev = torch.zeros(1, H, n, n), torch.zeros(1, H, n), torch.zeros(1, H, dtype=torch.bool)

    def ours():
        g = falcon_suite.grad(q, k, v, beta, alpha, dO=dO, form="chunk", chunk=64, align="same", eps=eps,
                              threads=th)
        return g["dq"], g["dk"], g["dv"], g["dbeta"]

    def autograd():
        leaves = [torch.from_numpy(x).requires_grad_(True) for x in (q, k, v, beta)]
        o = chunk_falcon1(*leaves[:3], leaves[3], log_alpha, zero_h, no_prev, has_prev, align="same", eps=eps,
                          chunk=a.peer_chunk)[0]
        o.backward(torch.from_numpy(dO))
        return tuple(t.grad.numpy() for t in leaves)

    return [("falcon-backward-chunk-64", ours), ("torch-autograd-chunk", autograd)]


def rel_diff(got, ref):
    """The largest difference over the largest magnitude, the worst of the
    tensors when each is a tuple of them."""
    import numpy as np
    if not isinstance(ref, tuple):
        got, ref = (got,), (ref,)
    return max(float(np.abs(np.asarray(g, np.float64) - r).max()) / max(float(np.abs(r).max()), 1e-300)
               for g, r in zip(got, ref))


def child(a):
    """One thread count: time every implementation, print one JSON line."""
    try:
        import numpy as np
        import torch
    except ImportError:
        print("skipped: torch not installed")
        return 77
    sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import falcon_suite
    from torch_falcon_chunk import chunk_falcon1
    try:
        falcon_suite.lib_path()
    except falcon_suite.FalconError as e:
        print("skipped: %s (build it first: make)" % e)
        return 77
    th = a.child
    torch.set_num_threads(a.torch_threads or th)
    T, H, n = a.T, a.heads, a.n
    q, k, v, beta, alpha = inputs(T, H, n, a.seed)
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    eps = 1e-6
    rule_beta = torch.from_numpy(beta) / (eps + (tk * tk).sum(-1))     # eta_t
    log_alpha = torch.from_numpy(np.log(alpha.astype(np.float64)))
    g32 = log_alpha.float()
    if a.bug == "no-decay":
        g32 = torch.zeros_like(g32)
    if a.bug == "no-normaliser":
        rule_beta = torch.from_numpy(beta)
    zero_h = torch.zeros(1, H, n, n)
    no_prev = torch.zeros(1, H, n)
    has_prev = torch.zeros(1, H, dtype=torch.bool)

    def ours(form, chunk):
        return lambda: falcon_suite.run(q, k, v, beta, alpha, form=form, align="same", eps=eps,
                                  chunk=chunk, threads=th)[0]

    ggml, scales = None, {}
    if a.ggml and not a.backward:
        eta = rule_beta.numpy()
        try:
            ggml = Ggml(a.ggml, q, k, v, g32.numpy(), eta, th, a.repeats + 2)
        except (OSError, AttributeError) as e:  # no such library, or no such op in it
            print("peers: ggml: not measured: %s" % e, file=sys.stderr)
    impls = [
        ("falcon-chunk-auto", ours("chunk", "auto")),
        ("falcon-chunk-64", ours("chunk", 64)),
        ("falcon-recurrent", ours("recurrent", "auto")),
        ("naive-chunk", lambda: naive_chunk(tq, tk, tv, g32, rule_beta, a.peer_chunk)[0].numpy()),
        ("torch-chunk", lambda: chunk_falcon1(tq, tk, tv, torch.from_numpy(beta), log_alpha, zero_h, no_prev,
                                              has_prev, align="same", eps=eps, chunk=a.peer_chunk)[0].numpy()),
    ]
    if ggml:
        impls.append(("ggml-recurrent", ggml))
        scales["ggml-recurrent"] = ggml.scale
    if a.backward:
        impls = backward_impls(a, th, q, k, v, beta, alpha, eps)
    ref = impls[0][1]()
    ref = tuple(np.asarray(r, np.float64) for r in ref) if isinstance(ref, tuple) else ref.astype(np.float64)
    disagree = {}
    for name, f in impls:                                                # the warm-up call checks
        got = f()
        disagree[name] = rel_diff(got if isinstance(got, tuple) else got * scales.get(name, 1), ref)
    times = {name: [] for name, _ in impls}
    for _ in range(a.repeats):
        for name, f in impls:
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    print(json.dumps({"threads": th, "T": T, "heads": H, "n": n, "m": n, "peer_chunk": a.peer_chunk,
                      "backward": bool(a.backward),
                      "torch": torch.__version__, "blas_core": blas_core() or "not OpenBLAS",
                      "ggml": ggml.variant if ggml else None,
                      "max_rel_diff": disagree, "times": times}))
    return 0


def median(xs):
    s = sorted(xs)
    h = len(s) // 2
    return s[h] if len(s) % 2 else 0.5 * (s[h - 1] + s[h])


def threads_used(name, row, P):
    """What the threads column says of an implementation."""
    if name.startswith("falcon-"):
        return "-"
    if name.startswith("ggml-"):
        return "ggml's %d" % P
    return "%d, %d" % (row["torch_threads"], row["blas_threads"])


def thread_configs(P):
    """(torch's threads, BLAS threads) for P cores. At one thread, one;
    else each peer's best of three: on Zen 4 at P = 2 the worked example
    took 109 ms with torch at 1 and OpenBLAS at 2 threads, 123 ms at 2 and
    1, and 659 ms at 2 and 2, whose four threads share two cores."""
    return [(1, 1)] if P == 1 else [(P, 1), (1, P), (P, P)]


def summarize(P, runs):
    """runs: (config, the child's JSON) for each of thread_configs(P).
    Each implementation at its best configuration (the median time); a
    disagreement in any counts."""
    r0 = runs[0][1]
    work = 6.0 * r0["n"] * r0["m"] * r0["T"] * r0["heads"]
    rows = {}
    for name in r0["times"]:
        best = min(runs, key=lambda cr: median(cr[1]["times"][name]))
        t = median(best[1]["times"][name])
        rows[name] = {"seconds": t, "tokens_per_second": r0["T"] * r0["heads"] / t, "gflops_6nm": work / t / 1e9,
                      "max_rel_diff": max(r["max_rel_diff"][name] for _, r in runs),
                      "torch_threads": best[0][0], "blas_threads": best[0][1]}
    speedups = {}
    for ours in [r for r in rows if r.startswith("falcon-")]:
        for peer in [p for p in rows if not p.startswith("falcon-")]:
            speedups["%s/%s" % (ours, peer)] = rows[peer]["seconds"] / rows[ours]["seconds"]
    return {"threads": P, "T": r0["T"], "heads": r0["heads"], "n": r0["n"], "m": r0["m"],
            "backward": r0.get("backward", False), "peer_chunk": r0["peer_chunk"], "torch": r0["torch"], "blas_core": r0["blas_core"],
            "ggml": r0.get("ggml"),
            "repeats": len(next(iter(r0["times"].values()))), "implementations": rows, "speedups": speedups}


# OpenBLAS's cores without AVX2 (as bench/blas.c lists them): OpenBLAS
# 0.3.21 takes some newer CPUs (a Xeon of model 207) for one of them and
# runs SSE3 code there, which would make a slow peer of torch's GEMMs.
PRE_AVX2 = {"prescott", "core2", "penryn", "dunnington", "nehalem", "sandybridge", "katmai", "coppermine",
            "northwood", "banias", "atom", "generic", "barcelona", "opteron", "opteron_sse3", "bobcat",
            "bulldozer"}


def blas_core():
    """The core OpenBLAS picked for the BLAS torch loads (libblas.so.3),
    or None when that is not OpenBLAS."""
    import ctypes
    try:
        f = ctypes.CDLL("libblas.so.3").openblas_get_corename
    except (OSError, AttributeError):
        return None
    f.restype = ctypes.c_char_p
    return f().decode()


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def blas_env():
    """OPENBLAS_CORETYPE for the children, as falcon-bench sets it: only
    where OpenBLAS picked a core without AVX2 on a CPU that has it, and
    the environment names none."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return {}
    core = blas_core()
    if core is None or core.lower() not in PRE_AVX2:
        return {}
    fl = cpu_flags()
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= fl:
        return {"OPENBLAS_CORETYPE": "SkylakeX"}
    if {"avx2", "fma"} <= fl:
        return {"OPENBLAS_CORETYPE": "Haswell"}
    return {}


def cpu_name():
    """The CPU as /proc/cpuinfo names it (model name, family and model)."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                key = key.strip()
                if key in ("model name", "cpu family", "model") and key not in info:
                    info[key] = val.strip()
    except OSError:
        return "unknown"
    return "%s (family %s model %s)" % (info.get("model name", "?"), info.get("cpu family", "?"),
                                        info.get("model", "?"))


def write_json(path, obj):
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, ".%s.tmp-%d" % (os.path.basename(path), os.getpid()))
    try:
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


GOAL = 6.0       # the goals' lead over the naive chunk code at one thread (README, "Peers")
GGML_GOAL = 3.0  # over ggml's gated_delta_net, both forms, 1 and 2 threads


BACKWARD_GOAL = 3.0  # libfalcon's backward over torch's autograd through the chunk example, 1 and 2 threads


def backward_table(j):
    """The markdown table of a --backward --json file."""
    out = ["Backward peer (`bench/peers.py --backward`, %s): the gradients dq, dk, dv, dbeta of Falcon-1 with a "
           "decay, fp32, same-step alignment, given dO; torch's time is its autograd's forward and backward "
           "through `examples/torch_falcon_chunk.py`. Medians." % j["cpu"], "",
           "| threads | implementation | ms | tokens/s | over torch-autograd-chunk | threads (torch, BLAS) |",
           "|---|---|---|---|---|---|"]
    verdict = []
    for r in j["runs"]:
        imp = r["implementations"]
        for name, row in imp.items():
            over = r["speedups"].get("%s/torch-autograd-chunk" % name)
            out.append("| %d | %s | %.1f | %.1fk | %s | %s |" % (
                r["threads"], name, row["seconds"] * 1e3, row["tokens_per_second"] / 1e3,
                "%.2fx" % over if over else "", threads_used(name, row, r["threads"])))
        x = r["speedups"]["falcon-backward-chunk-64/torch-autograd-chunk"]
        verdict.append("%d thread%s: %.2fx (goal >= %gx: %s)" % (r["threads"], "" if r["threads"] == 1 else "s", x,
                                                                 BACKWARD_GOAL, "met" if x >= BACKWARD_GOAL else "not met"))
    r0 = j["runs"][0]
    out += ["", "T = %d, %d head%s, n = m = %d; torch %s, OpenBLAS core %s. %s." % (
        r0["T"], r0["heads"], "" if r0["heads"] == 1 else "s", r0["n"], r0["torch"], r0["blas_core"],
        "; ".join(verdict)), ""]
    return "\n".join(out)


def table(path):
    """The markdown table of a --json file (make goals, verify/tools/report.sh)."""
    with open(path) as f:
        j = json.load(f)
    if j["runs"] and j["runs"][0].get("backward"):
        return backward_table(j)
    peers = [p for p in PEERS if any(p in r["implementations"] for r in j["runs"])]
    out = ["Peers (`bench/peers.py`, %s): Falcon-1 with a decay, fp32, same-step alignment; tokens/s are "
           "medians, `gflops_6nm` the least work (6 n m flops a token and head) over the time." % j["cpu"], "",
           "| threads | implementation | tokens/s | gflops_6nm | %s | threads (torch, BLAS) |" %
           " | ".join("over " + p for p in peers),
           "|---|---|---|---|%s---|" % ("---|" * len(peers))]
    verdict = []
    for r in j["runs"]:
        imp = r["implementations"]
        for name, row in imp.items():
            ours = name.startswith("falcon-")
            over = ["%.2fx" % r["speedups"]["%s/%s" % (name, p)] if ours and p in imp else "" for p in peers]
            out.append("| %d | %s | %.0fk | %.1f | %s | %s |" % (
                r["threads"], name, row["tokens_per_second"] / 1e3, row["gflops_6nm"], " | ".join(over),
                "" if ours else threads_used(name, row, r["threads"])))
        mine = [n for n in imp if n.startswith("falcon-")]
        best = max(r["speedups"]["%s/naive-chunk" % n] for n in mine)
        say = "%d thread%s: best %.2fx the naive chunk code" % (r["threads"], "" if r["threads"] == 1 else "s", best)
        if r["threads"] == 1:
            peer = imp["naive-chunk"]["gflops_6nm"]
            say += " (goal >= %gx at one thread: %s; the naive code at %.1f GFLOPS of the least work, so %gx " \
                   "needs %.0f GFLOPS)" % (GOAL, "met" if best >= GOAL else "not met", peer, GOAL, GOAL * peer)
        if "ggml-recurrent" in imp:
            low = min(r["speedups"]["%s/ggml-recurrent" % n] for n in ("falcon-chunk-auto", "falcon-recurrent"))
            say += "; both forms at least %.2fx ggml's op (goal >= %gx: %s)" % (
                low, GGML_GOAL, "met" if low >= GGML_GOAL else "not met")
        verdict.append(say)
    r0 = j["runs"][0]
    out += ["", "T = %d, %d heads, n = m = %d; torch %s, OpenBLAS core %s%s. %s." % (
        r0["T"], r0["heads"], r0["n"], r0["torch"], r0["blas_core"],
        "; ggml %s" % r0["ggml"] if r0.get("ggml") else "; ggml not measured (--ggml DIR)", "; ".join(verdict)), ""]
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--heads", type=int, help="default 8 (--backward: 1)")
    ap.add_argument("--n", type=int, default=128, help="key and value size (n = m)")
    ap.add_argument("--threads", help="comma-separated thread counts (default 1,2; --quick: 1)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--peer-chunk", type=int, default=64, help="the peers' chunk size (default 64)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ggml", metavar="DIR", default=os.environ.get("FALCON_PEERS_GGML"),
                    help="also ggml's gated_delta_net from DIR (libggml-base.so, libggml-cpu-*.so; "
                         "default $FALCON_PEERS_GGML)")
    ap.add_argument("--json", help="write the results here (replaced only by a run that measured)")
    ap.add_argument("--quick", action="store_true", help="T = 128, 2 heads, n = 16, 1 repeat")
    ap.add_argument("--backward", action="store_true",
                    help="the gradients: falcon_backward against torch's autograd (default 1 head)")
    ap.add_argument("--table", metavar="JSON", help="print the markdown table of an earlier --json file, and exit")
    ap.add_argument("--bug", choices=("no-decay", "no-normaliser"), help=argparse.SUPPRESS)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--torch-threads", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.table:
        try:
            print(table(a.table))
        except (OSError, ValueError, KeyError, TypeError) as e:
            print("peers: error: %s: not a bench/peers.py result (%s)" % (a.table, e), file=sys.stderr)
            return 2
        return 0
    if a.heads is None:
        a.heads = 1 if a.backward else 8
    if a.quick:
        a.T, a.heads, a.n, a.repeats = 128, 2, 16, 1
    if a.threads is None:
        a.threads = "1" if a.quick else "1,2"
    try:
        counts = [int(x) for x in a.threads.split(",")]
    except ValueError:
        counts = []
    if (not counts or min(counts) < 1 or a.T < 1 or a.heads < 1 or a.n < 1 or a.repeats < 1
            or a.peer_chunk < 1 or a.T % a.peer_chunk):
        print("peers: error: need positive sizes, thread counts and repeats, and T a multiple of "
              "--peer-chunk", file=sys.stderr)
        return 2
    if a.child:
        return child(a)
    if a.json and not os.path.isdir(os.path.dirname(os.path.abspath(a.json))):
        print("peers: error: no directory for %s" % a.json, file=sys.stderr)
        return 2
    results, status = [], 0
    fix = blas_env()
    for th in counts:
        runs = []
        for tt, bt in thread_configs(th):
            env = dict(os.environ, **fix, **{k: str(bt) for k in THREAD_VARS})
            env["OMP_NUM_THREADS"] = str(tt)
            cmd = [sys.executable, os.path.abspath(__file__), "--child", str(th), "--torch-threads", str(tt),
                   "--T", str(a.T), "--heads", str(a.heads), "--n", str(a.n), "--repeats", str(a.repeats),
                   "--peer-chunk", str(a.peer_chunk), "--seed", str(a.seed)] + (["--bug", a.bug] if a.bug else []) + \
                (["--backward"] if a.backward else []) + \
                (["--ggml", a.ggml] if a.ggml else [])
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, universal_newlines=True)
            if p.returncode == 77:
                print(p.stdout.strip() or "skipped")
                return 77
            if p.returncode != 0:
                print("peers: error: the %d-thread run failed (exit %d)" % (th, p.returncode), file=sys.stderr)
                return 1
            runs.append(((tt, bt), json.loads(p.stdout.strip().splitlines()[-1])))
        r = summarize(th, runs)
        results.append(r)
        print("threads %d: T = %d, %d heads, n = m = %d, torch %s (OpenBLAS core %s), medians of %d, %s" %
              (th, r["T"], r["heads"], r["n"], r["torch"], r["blas_core"], r["repeats"], cpu_name()))
        print("  %-18s %10s %14s %11s %13s  %s" % ("implementation", "ms", "tokens/s", "gflops_6nm", "max_rel_diff",
                                                  "threads (torch, BLAS)"))
        for name, row in r["implementations"].items():
            bad = row["max_rel_diff"] > TOLERANCE
            status |= bad
            print("  %-18s %10.2f %14.0f %11.1f %13.1e  %s%s" % (
                name, row["seconds"] * 1e3, row["tokens_per_second"], row["gflops_6nm"], row["max_rel_diff"],
                threads_used(name, row, th),
                "  DISAGREES" if bad else ""))
        for pair, s in r["speedups"].items():
            print("  speed-up %-34s %6.2f" % (pair.replace("/", " over "), s))
    if status:
        print("peers: error: a peer's outputs differ from libfalcon's by over %g of their largest "
              "magnitude: not the same work" % TOLERANCE, file=sys.stderr)
        return 1
    if a.json:
        write_json(a.json, {"cpu": cpu_name(), "tolerance": TOLERANCE, "runs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
