"""Wrong twins of examples/numpy_falcon.py: each differs from the correct
code in ONE plausible way a kernel engineer might get wrong, so that a
grader (`falcon check`) can be shown to fail every one of them.

    python3 examples/numpy_falcon.py cases results --dtype float32 --bug NAME

Each twin is a subclass of numpy_falcon.Falcon overriding one method,
registered with:
  name      the --bug name
  feature   what a case must have for the twin to differ from the correct
            code (verify/test_twins.sh: "no case exercises <feature>")
  desc      the mistake, in one line
  layouts   the case-set layouts (falcon, fla, ggml) that can express it
  applies   a predicate on a loaded case (falcon_suite.load_case): the cases of
            the feature, where the twin computes something else. It is a
            superset: a case it selects may still be too weak to catch it.
"""
from types import SimpleNamespace

import numpy as np

from numpy_falcon import Falcon, GAINS, SUPPORTED

ALL = ("falcon", "fla", "ggml")
SCALED = ("fla", "ggml")   # the layouts whose reads carry a scale
TWINS = {}                 # name -> class (with .feature, .desc, .layouts, .applies)


def twin(name, feature, desc, applies, layouts=ALL):
    def register(cls):
        cls.name, cls.feature, cls.desc, cls.layouts = name, feature, desc, layouts
        cls.applies = staticmethod(applies)
        TWINS[name] = cls
        return cls
    return register


def twin_class(name):
    return TWINS[name] if name in TWINS else VARIANT_TWINS[name]


# ---- predicates on a loaded case ----
def steps(c):
    return c.T > 0


def regression(c):
    return SUPPORTED[c.variant][0]


def windowed(c):
    return SUPPORTED[c.variant][1] and int(c.window) >= 2


def gains(c):
    return c.variant in GAINS and c.T > 0


def prefix(c):
    return c.align == "prefix" and c.T > 0


def decayed(c):
    return c.alpha is not None and c.T > 0 and bool(np.any(c.alpha != 1))


def memory(c):
    return bool(np.any(c.state_in["S"] != 0))


def history(c, least=1):
    return SUPPORTED[c.variant][1] and int(np.max(c.state_in["hist_len"], initial=0)) >= least


def carried_any(c):
    st = c.state_in
    return memory(c) or bool(np.any(st["has_prev"])) or history(c)


def fresh_prefix(c):
    return prefix(c) and not bool(np.all(c.state_in["has_prev"]))


def any_phi(c):
    return c.phi != "identity" and c.T > 0


def phi_is(*names):
    return lambda c: c.phi in names and c.T > 0


def heads(c):
    return c.H > 1 and c.T > 0


def key_rows(c):
    """Every key and query row, carried keys included, [rows, n]."""
    st = c.state_in
    return np.concatenate([c.q.reshape(-1, c.n), c.k.reshape(-1, c.n), st["prev_key"].reshape(-1, c.n),
                           st["hist_k"].reshape(-1, c.n)]).astype(np.float64)


def extreme_rows(c):
    """A key or query row whose x.x underflows or overflows float32."""
    big = np.max(np.abs(key_rows(c)), axis=1)
    return bool(np.any((big > 0) & ((big < 1e-18) | (big > 1e18))))


def both(*preds):
    return lambda c: all(p(c) for p in preds)


# ---- the variants ----
@twin("gain-on-x", "Falcon-2/2A gains (g != 1)", "the gains scale the key itself: z = g x also in the residual and eta",
      lambda c: gains(c) and bool(np.any(c.gain != 1)))
class GainOnX(Falcon):
    def learn(self, S, hd, t):
        X, Y = self.examples(hd)
        Z = self.directions(X, hd, t)
        return self.write(S, Z, Y, Z, self.eta(hd.beta[t], Z, Z))


@twin("eta-without-gains", "Falcon-2/2A gains (g != 1)", "eta = beta / (eps + x.x): the normaliser ignores the gains",
      lambda c: gains(c) and bool(np.any(c.gain != 1)))
class EtaWithoutGains(Falcon):
    def eta(self, beta, X, Z):
        return super().eta(beta, X, X)


@twin("gains-squared", "Falcon-2/2A gains (g != 1)", "z = g^2 x: the gains applied twice",
      lambda c: gains(c) and bool(np.any((c.gain != 1) & (c.gain != 0))))
class GainsSquared(Falcon):
    def directions(self, X, hd, t):
        Z = super().directions(X, hd, t)
        return Z if hd.gain is None else hd.gain[t] * Z


@twin("gain-previous-step", "Falcon-2/2A gains under prefix alignment",
      "z = g_{t-1} x: the gain of the step that revealed the key instead of the writing step's",
      lambda c: gains(c) and c.align == "prefix")
class GainPreviousStep(Falcon):
    def directions(self, X, hd, t):
        if hd.gain is None or self.same:  # same alignment: the key's step is the writing step
            return super().directions(X, hd, t)
        return hd.gain[max(t - 1, 0)] * X


@twin("window-short", "a window of W >= 2 examples", "the window holds W - 1 examples", windowed)
class WindowShort(Falcon):
    def __init__(self, case, dt):
        super().__init__(case, dt)
        self.W = max(1, self.W - 1)


@twin("window-long", "a window of W >= 2 examples", "the window holds W + 1 examples", windowed)
class WindowLong(Falcon):
    def __init__(self, case, dt):
        super().__init__(case, dt)
        if SUPPORTED[case.variant][1]:
            self.W += 1


@twin("window-sequential", "a regression window of W >= 2 examples (Falcon-3)",
      "each window residual against the memory updated by the window's earlier examples, not Sbar",
      both(windowed, regression))
class WindowSequential(Falcon):
    def write(self, S, X, Y, Z, eta):
        if not self.regression or self.W < 2:
            return super().write(S, X, Y, Z, eta)
        for x, y, z in zip(X, Y, Z):
            S = S + eta * np.outer(y - S @ x, z)
        return S


@twin("window-eta-last", "a window of W >= 2 examples", "eta from the newest example only: beta / (eps + x_t.x_t)",
      windowed)
class WindowEtaLast(Falcon):
    def eta(self, beta, X, Z):
        return super().eta(beta, X[-1:], Z[-1:])


@twin("window-eps-each", "a window of W >= 2 examples", "eps added once per window example: beta / (w eps + SUM x.x)",
      windowed)
class WindowEpsEach(Falcon):
    def eta(self, beta, X, Z):
        return beta / (self.eps * self.dt(len(X)) + np.sum(X * Z, dtype=self.dt))


@twin("a-regression-residual", "an inner-product variant (1A/2A/3A)",
      "the A variants write the regression residual y - Sbar x",
      lambda c: not regression(c) and steps(c))
class ARegressionResidual(Falcon):
    def __init__(self, case, dt):
        super().__init__(case, dt)
        self.regression = True


@twin("regression-no-residual", "a regression variant (1/2/3)", "the regression variants write y, not y - Sbar x",
      lambda c: regression(c) and steps(c))
class RegressionNoResidual(Falcon):
    def __init__(self, case, dt):
        super().__init__(case, dt)
        self.regression = False


# ---- alignment ----
@twin("same-step", "prefix alignment", "always learn (phi(k_t), v_t), ignoring prefix alignment", prefix)
class SameStep(Falcon):
    def __init__(self, case, dt):
        super().__init__(case, dt)
        self.same = True


def zero_key_visible(c):
    """A zero key's example changes something: phi(0) != 0 (elu1), or a
    carried window history without a previous key (the history is rewritten
    at step 1, which has no example). Otherwise x = 0 writes nothing, adds
    nothing to eta, and the window slot it takes is given back before a
    real example is dropped."""
    st = c.state_in
    return c.phi == "elu1" or (history(c) and bool(np.any(st["hist_len"][~st["has_prev"]] > 0)))


@twin("prefix-zero-key", "prefix alignment from a fresh state under elu1 (or a history without a previous key)",
      "a fresh state's first step learns (phi(0), v_1): k_0 = 0 instead of no example",
      lambda c: fresh_prefix(c) and zero_key_visible(c))
class PrefixZeroKey(Falcon):
    def carried(self, st, b, h):
        S, prev, hist = super().carried(st, b, h)
        return S, self.phi(np.zeros(self.case.n)) if prev is None else prev, hist


@twin("has-prev-ignored",
      "prefix alignment from a state without a previous key (under elu1, a history, or a stored key)",
      "the stored prev_key is used even when has_prev is false",
      lambda c: fresh_prefix(c) and (zero_key_visible(c) or bool(np.any(c.state_in["prev_key"]
                                                                            [~c.state_in["has_prev"]] != 0))))
class HasPrevIgnored(Falcon):
    def carried(self, st, b, h):
        S, _, hist = super().carried(st, b, h)
        return S, self.phi(st["prev_key"][b * self.case.H + h]), hist


@twin("prev-key-ignored", "prefix alignment from a carried previous key",
      "the carried previous key is never used: step 1 has no example",
      lambda c: prefix(c) and bool(np.any(c.state_in["has_prev"])))
class PrevKeyIgnored(Falcon):
    def carried(self, st, b, h):
        S, _, hist = super().carried(st, b, h)
        return S, None, hist


# ---- the feature map ----
@twin("relu-as-identity", "phi = relu", "relu treated as the identity", phi_is("relu"))
class ReluAsIdentity(Falcon):
    def relu(self, x):
        return x


@twin("relu-leaky", "phi = relu on negative entries", "a leaky relu (0.01 x below 0)",
      lambda c: phi_is("relu")(c) and bool(np.any(key_rows(c) < 0)))
class ReluLeaky(Falcon):
    def relu(self, x):
        return np.where(x > 0, x, self.dt(0.01) * x)


@twin("relu-at-zero", "phi = relu on exact zeros", "relu(0) = 1 (a >= test taking the elu1 branch)",
      lambda c: phi_is("relu")(c) and bool(np.any(key_rows(c) == 0)))
class ReluAtZero(Falcon):
    def relu(self, x):
        return np.where(x == 0, self.dt(1), super().relu(x))


@twin("elu-no-plus-one", "phi = elu1", "elu instead of elu + 1: x if x > 0 else exp(x) - 1", phi_is("elu1"))
class EluNoPlusOne(Falcon):
    def elu1(self, x):
        return np.where(x > 0, x, np.expm1(np.minimum(x, self.dt(0))))


@twin("elu1-shift-all", "phi = elu1 on negative entries", "elu1(x) = x + 1 for every x",
      lambda c: phi_is("elu1")(c) and bool(np.any(key_rows(c) < 0)))
class Elu1ShiftAll(Falcon):
    def elu1(self, x):
        return x + self.dt(1)


@twin("l2norm-eps", "phi = l2norm", "x / (||x|| + 1e-6)", phi_is("l2norm"))
class L2normEps(Falcon):
    def l2norm(self, x):
        nrm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True, dtype=self.dt))
        return x / (nrm + self.dt(1e-6))


@twin("l2norm-unscaled", "phi = l2norm of tiny or huge vectors (x.x under- or overflows)",
      "x / sqrt(x.x) without scaling first: x.x underflows or overflows",
      lambda c: phi_is("l2norm")(c) and extreme_rows(c))
class L2normUnscaled(Falcon):
    def l2norm(self, x):
        nrm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True, dtype=self.dt))
        return np.where(nrm > 0, x / np.where(nrm > 0, nrm, self.dt(1)), self.dt(0))


@twin("l2norm-all-heads", "phi = l2norm with several heads", "the norm taken over all heads of a step together",
      both(phi_is("l2norm"), heads))
class L2normAllHeads(Falcon):
    def features(self, c):
        if c.phi != "l2norm":
            return super().features(c)

        def joint(x):  # [B,T,H,n]: one norm per (b, t)
            B, T, H, n = x.shape
            return self.l2norm(x.astype(self.dt).reshape(B, T, H * n)).reshape(B, T, H, n)
        return joint(c.q), joint(c.k)


@twin("phi-not-on-queries", "a feature map (phi != identity)",
      "phi applied to the keys only; the read uses the raw query",
      any_phi)
class PhiNotOnQueries(Falcon):
    def features(self, c):
        return c.q.astype(self.dt), self.phi(c.k)


def raw_keys(f, st, b, h, prev, hist):
    """The carried previous key and history keys without phi."""
    head = b * f.case.H + h
    prev = None if prev is None else st["prev_key"][head].astype(f.dt)
    return prev, [(st["hist_k"][head, i].astype(f.dt), y) for i, (_, y) in enumerate(hist)]


@twin("phi-not-on-keys", "a feature map (phi != identity)", "phi applied to the queries only; keys written raw",
      any_phi)
class PhiNotOnKeys(Falcon):
    def features(self, c):
        return self.phi(c.q), c.k.astype(self.dt)

    def carried(self, st, b, h):
        S, prev, hist = super().carried(st, b, h)
        return (S,) + raw_keys(self, st, b, h, prev, hist)


@twin("history-keys-raw", "a carried window history under a feature map",
      "phi not applied to the carried history's keys (they are stored raw)",
      lambda c: history(c) and any_phi(c))
class HistoryKeysRaw(Falcon):
    def carried(self, st, b, h):
        S, prev, hist = super().carried(st, b, h)
        return S, prev, raw_keys(self, st, b, h, prev, hist)[1]


# ---- eps ----
@twin("eps-dropped", "a step with an example", "eta = beta / x.x: no normaliser floor", steps)
class EpsDropped(Falcon):
    def eta(self, beta, X, Z):
        return beta / np.sum(X * Z, dtype=self.dt)


@twin("eps-outside", "a step with an example", "eta = beta / x.x + eps", steps)
class EpsOutside(Falcon):
    def eta(self, beta, X, Z):
        return beta / np.sum(X * Z, dtype=self.dt) + self.eps


@twin("eps-squared", "a step with an example", "eta = beta / (eps^2 + x.x)", steps)
class EpsSquared(Falcon):
    def eta(self, beta, X, Z):
        return beta / (self.eps * self.eps + np.sum(X * Z, dtype=self.dt))


# ---- decay ----
@twin("decay-after-write", "decay", "the decay applied after the write instead of before", decayed)
class DecayAfterWrite(Falcon):
    def decay(self, S, hd, t):
        return S

    def keep(self, S, hd, t):
        return S if hd is None else super().decay(S, hd, t)


@twin("decay-skip-first", "decay of a carried non-zero memory", "no decay at step 1", both(decayed, memory))
class DecaySkipFirst(Falcon):
    def decay(self, S, hd, t):
        return S if t == 0 else super().decay(S, hd, t)


@twin("decay-twice", "decay", "the decay applied twice: alpha^2", decayed)
class DecayTwice(Falcon):
    def decay(self, S, hd, t):
        return super().decay(super().decay(S, hd, t), hd, t)


@twin("decay-read-only", "decay", "the decay scales the read, never the stored memory", decayed)
class DecayReadOnly(Falcon):
    def decay(self, S, hd, t):
        return S

    def step(self, hd, t):
        o = super().step(hd, t)
        return o if hd.alpha is None else hd.alpha[t] * o


@twin("decay-previous-step", "decay", "step t decays with alpha_{t-1} (step 1 with 1)", decayed)
class DecayPreviousStep(Falcon):
    def decay(self, S, hd, t):
        return S if t == 0 else super().decay(S, hd, t - 1)


@twin("residual-before-decay", "decay in a regression variant",
      "the residual y - S x taken against the undecayed memory S_{t-1}", both(decayed, regression))
class ResidualBeforeDecay(Falcon):
    def learn(self, S, hd, t):
        if not self.regression:
            return super().learn(S, hd, t)
        X, Y = self.examples(hd)
        Z = self.directions(X, hd, t)
        R = Y - X @ hd.S.T
        return S + (self.eta(hd.beta[t], X, Z) * R).T @ Z


@twin("decay-skip-chunk-start",
      "decay at a chunk start with a non-zero memory (t = 1 of a carried state, t = 65, 129, ...)",
      "no decay at the first step of every 64-step chunk",
      lambda c: decayed(c) and (memory(c) or c.T > 64))
class DecaySkipChunkStart(Falcon):
    def decay(self, S, hd, t):
        return S if t % 64 == 0 else super().decay(S, hd, t)


@twin("decay-frozen-after-1000", "decay after step 1000", "from step 1001 on the decay is not applied",
      lambda c: decayed(c) and c.T > 1000 and bool(np.any(c.alpha[:, 1000:] != 1)))
class DecayFrozenAfter1000(Falcon):
    def decay(self, S, hd, t):
        return S if t >= 1000 else super().decay(S, hd, t)


# ---- the carried state ----
@twin("memory-ignored", "a carried non-zero memory", "the initial memory ignored (zeros)", memory)
class MemoryIgnored(Falcon):
    def carried(self, st, b, h):
        S, prev, hist = super().carried(st, b, h)
        return np.zeros_like(S), prev, hist


@twin("state-wrong-batch", "a carried state with several batch rows", "the initial state of batch row b + 1 mod B",
      lambda c: carried_any(c) and (c.B > 1 or packed(c)))
class StateWrongBatch(Falcon):
    def carried(self, st, b, h):
        return super().carried(st, (b + 1) % len(self.sequences()), h)


@twin("state-wrong-head", "a carried state with several heads", "the initial state of head h + 1 mod H",
      lambda c: carried_any(c) and c.H > 1)
class StateWrongHead(Falcon):
    def carried(self, st, b, h):
        return super().carried(st, b, (h + 1) % self.case.H)


@twin("memory-transposed", "a carried non-zero memory", "the initial memory's buffer read as [n][m] (transposed)",
      memory)
class MemoryTransposed(Falcon):
    def carried(self, st, b, h):
        S, prev, hist = super().carried(st, b, h)
        return S.reshape(self.case.n, self.case.m).T.copy(), prev, hist


@twin("history-ignored", "a carried window history", "the carried window history ignored",
      lambda c: history(c) and steps(c))
class HistoryIgnored(Falcon):
    def carried(self, st, b, h):
        S, prev, _ = super().carried(st, b, h)
        return S, prev, []


@twin("history-reversed", "a carried window history of 2+ examples", "the carried history read newest first",
      lambda c: history(c, 2) and steps(c))
class HistoryReversed(Falcon):
    def carried(self, st, b, h):
        S, prev, hist = super().carried(st, b, h)
        return S, prev, hist[::-1]


# ---- batch and head indexing ----
@twin("heads-swapped-out", "several heads", "the outputs' heads in reverse order", heads)
class HeadsSwappedOut(Falcon):
    def layout(self, out, state):
        return super().layout(out[:, :, ::-1].copy(), state)


@twin("batch-swapped-out", "several batch rows", "the outputs' batch rows in reverse order",
      lambda c: c.B > 1 and c.T > 0)
class BatchSwappedOut(Falcon):
    def layout(self, out, state):
        return super().layout(out[::-1].copy(), state)


@twin("state-wrong-head-out", "several heads", "each head's final state written to head h + 1 mod H",
      lambda c: c.H > 1)
class StateWrongHeadOut(Falcon):
    def layout(self, out, state):
        return super().layout(out, np.roll(state, 1, axis=1))


# ---- packed batches and grouped heads ----
def packed(c):
    return getattr(c, "cu_seqlens", None) is not None and c.T > 0


def grouped(mapping):
    return lambda c: getattr(c, "qk_heads", c.H) < c.H and c.head_map == mapping and c.T > 0


PACKED_LAYOUTS = ("falcon", "fla")  # ggml_gated_delta_net has neither


@twin("packed-state-leaks", "a packed batch (cu_seqlens)",
      "each packed sequence starts from the state the sequence before it ended with", packed, PACKED_LAYOUTS)
class PackedStateLeaks(Falcon):
    def start(self, st, s, h, ended):
        if not packed(self.case) or h not in ended:
            return super().start(st, s, h, ended)
        hd = ended[h]
        return hd.S, hd.prev, list(hd.window)


@twin("packed-start-off-by-one", "a packed batch (cu_seqlens)",
      "each packed sequence starts one step late (cu_seqlens read as the last step before it)", packed,
      PACKED_LAYOUTS)
class PackedStartOffByOne(Falcon):
    def sequences(self):
        if not packed(self.case):
            return super().sequences()
        return [(b, min(t0 + 1, t1), t1, s) for b, t0, t1, s in super().sequences()]


@twin("interleaved-read-as-tiled", "grouped heads, interleaved",
      "value head h reads q/k head h % H_qk where the mapping is h // G", grouped("interleaved"), PACKED_LAYOUTS)
class InterleavedReadAsTiled(Falcon):
    def qk_head(self, h):
        hq = getattr(self.case, "qk_heads", self.case.H)
        return h % hq


# ---- chunk boundaries and long sequences ----
@twin("drop-write-every-64", "a step t = 64, 128, ... with an example", "every 64th step drops its write",
      lambda c: c.T >= 64)
class DropWriteEvery64(Falcon):
    def learn(self, S, hd, t):
        return S if (t + 1) % 64 == 0 else super().learn(S, hd, t)


@twin("prev-key-chunk-reset", "prefix alignment past a chunk boundary (T > 64)",
      "the previous key reset at every 64-step chunk boundary: step 65 has no example",
      lambda c: prefix(c) and c.T > 64)
class PrevKeyChunkReset(Falcon):
    def example_key(self, hd, t):
        if t > 0 and t % 64 == 0:
            hd.prev = None
        return super().example_key(hd, t)


@twin("window-chunk-reset", "a window past a chunk boundary (T > 64)",
      "the window emptied at every 64-step chunk boundary", lambda c: windowed(c) and c.T > 64)
class WindowChunkReset(Falcon):
    def example_key(self, hd, t):
        if t > 0 and t % 64 == 0:
            hd.window.clear()
        return super().example_key(hd, t)


# ---- beta ----
@twin("beta0-skips-bookkeeping", "a step with beta = 0",
      "a beta = 0 step skipped whole: its key is not recorded as the previous key nor its example in the window",
      lambda c: steps(c) and bool(np.any(c.beta == 0)))
class Beta0SkipsBookkeeping(Falcon):
    def step(self, hd, t):
        if hd.beta[t] != 0:
            return super().step(hd, t)
        hd.S = self.keep(self.decay(hd.S, hd, t), hd, t)
        return self.read(hd.S, hd.fq[t])


@twin("beta-clipped", "beta > 1", "beta clipped to [0, 1]", lambda c: steps(c) and bool(np.any(c.beta > 1)))
class BetaClipped(Falcon):
    def eta(self, beta, X, Z):
        return super().eta(min(beta, self.dt(1)), X, Z)


# ---- subnormals and precision ----
def subnormal_reach(c):
    """Decays that drive the memory into the subnormal range, or subnormal inputs."""
    tiny = np.finfo(np.float32).tiny
    arrays = [c.q, c.k, c.v, c.beta, c.state_in["S"]] + ([c.alpha] if c.alpha is not None else [])
    sub = any(bool(np.any((a != 0) & (np.abs(a) < tiny))) for a in arrays)
    return sub or (steps(c) and c.decay in ("strong", "extreme", "reset-slow", "mix"))


@twin("flush-to-zero", "subnormal inputs or intermediates", "subnormal inputs and memory entries flushed to zero",
      subnormal_reach)
class FlushToZero(Falcon):
    def ftz(self, x):
        x = np.asarray(x, dtype=self.dt)
        return np.where(np.abs(x) < np.finfo(self.dt).tiny, self.dt(0), x)

    def run(self):
        c, st = self.case, self.case.state_in
        flush = {key: None if getattr(c, key) is None else self.ftz(getattr(c, key))
                 for key in ("q", "k", "v", "beta", "alpha", "gain")}
        flush["state_in"] = dict(st, **{key: self.ftz(st[key]) for key in ("S", "prev_key", "hist_k", "hist_v")})
        self.case = SimpleNamespace(**dict(vars(c), **flush))
        return super().run()

    def decay(self, S, hd, t):
        return self.ftz(super().decay(S, hd, t))

    def keep(self, S, hd, t):
        return self.ftz(S)


@twin("state-fp16", "a non-zero memory", "the memory kept in float16 between steps",
      lambda c: steps(c) or memory(c))
class StateFp16(Falcon):
    def keep(self, S, hd, t):
        return S.astype(np.float16).astype(self.dt)


def round_bf16(x):
    """float32 -> the nearest bfloat16 (ties to even), as float32."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


@twin("state-bf16", "a non-zero memory", "the memory kept in bfloat16 between steps",
      lambda c: steps(c) or memory(c))
class StateBf16(Falcon):
    def keep(self, S, hd, t):
        return round_bf16(S).astype(self.dt)


# ---- T = 0 and T = 1 ----
@twin("t0-zero-state", "no steps (T = 0) from a non-zero memory", "T = 0 returns a zero state",
      lambda c: c.T == 0 and memory(c))
class T0ZeroState(Falcon):
    def layout(self, out, state):
        return super().layout(out, np.zeros_like(state) if self.case.T == 0 else state)


def single_step(c):
    """T = 1, or a packed sequence of one step (a call of one step)."""
    cu = getattr(c, "cu_seqlens", None)
    return c.T == 1 or (cu is not None and bool(np.any(np.diff(cu) == 1)))


@twin("t1-read-before-write", "a single step (T = 1)", "with T = 1 the read comes before the write", single_step)
class T1ReadBeforeWrite(Falcon):
    def step(self, hd, t):
        if hd.T != 1:
            return super().step(hd, t)
        o = self.read(hd.S, hd.fq[t])
        super().step(hd, t)
        return o


# ---- read scale and layouts ----
@twin("scale-missing", "a read scale != 1", "the read scale not applied", lambda c: c.scale != 1 and c.T > 0, SCALED)
class ScaleMissing(Falcon):
    def __init__(self, case, dt):
        super().__init__(case, dt)
        self.scale = dt(1)


@twin("scale-twice", "a read scale != 1", "the read scale applied twice", lambda c: c.scale != 1 and c.T > 0, SCALED)
class ScaleTwice(Falcon):
    def __init__(self, case, dt):
        super().__init__(case, dt)
        self.scale = self.scale * self.scale


@twin("scale-inv-k", "a read scale with n > 1", "the read scale 1/K instead of 1/sqrt(K)",
      lambda c: c.n > 1 and c.T > 0, SCALED)
class ScaleInvK(Falcon):
    def __init__(self, case, dt):
        super().__init__(case, dt)
        self.scale = dt(1.0 / case.n)


@twin("scale-before-phi", "a read scale under elu1 or l2norm", "the scale applied to the query before phi: phi(s q)",
      lambda c: c.scale != 1 and phi_is("elu1", "l2norm")(c), SCALED)
class ScaleBeforePhi(Falcon):
    def features(self, c):
        fq, fk = super().features(c)
        return self.phi(self.scale * c.q.astype(self.dt)), fk

    def read(self, S, fq):
        return S @ fq


@twin("scale-on-keys", "a read scale != 1", "the read scale applied to the keys too",
      lambda c: c.scale != 1 and c.T > 0, SCALED)
class ScaleOnKeys(Falcon):
    def features(self, c):
        return self.phi(c.q), self.phi(self.scale * c.k.astype(self.dt))

    def carried(self, st, b, h):
        S, prev, hist = super().carried(st, b, h)
        prev, hist = raw_keys(self, st, b, h, prev, hist)
        return (S, None if prev is None else self.phi(self.scale * prev),
                [(self.phi(self.scale * x), y) for x, y in hist])


@twin("ggml-state-transposed", "a ggml state", "the ggml state written transposed ([i][j] for [j][i])",
      lambda c: True, ("ggml",))
class GgmlStateTransposed(Falcon):
    def layout(self, out, state):
        return super().layout(out, np.swapaxes(state, -1, -2))


@twin("fla-state-not-transposed", "an fla state", "the fla state's buffer written as [m][n], not transposed to [K][V]",
      lambda c: True, ("fla",))
class FlaStateNotTransposed(Falcon):
    def layout(self, out, state):
        B, H, m, n = state.shape
        return out, np.ascontiguousarray(state).reshape(B, H, n, m)


# ---- batch variance: within every threshold, so not in TWINS ----
VARIANT_TWINS = {}  # name -> class: kernels `falcon check` passes but reports BATCH-VARIANT


class BatchVariantReads(Falcon):
    """The reads of a case holding several sequences (B > 1, or packed)
    summed from the last column to the first: another rounding order, as a
    kernel that tiles by batch size takes, within every threshold but not
    the same bits as the sequence alone (flash-linear-attention issue 671)."""
    name = "batch-variant-reads"
    desc = "reads summed in another order when the batch holds several sequences"

    def read(self, S, fq):
        if len(self.sequences()) < 2:
            return super().read(S, fq)
        acc = np.zeros(S.shape[0], dtype=self.dt)
        for i in range(S.shape[1] - 1, -1, -1):
            acc = acc + S[:, i] * fq[i]
        return self.scale * acc


VARIANT_TWINS[BatchVariantReads.name] = BatchVariantReads
