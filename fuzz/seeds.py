#!/usr/bin/env python3
"""Writes the seed corpora of the fuzzing harnesses (fuzz/corpus/<h>/).

Run from the repository root: python3 fuzz/seeds.py. Deterministic; the
files are small and committed, so this only needs to run when they change.
"""
import os
import random
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def npy(descr="<f8", shape=(3, 2), fortran=False, version=1, data=None, pad=True, header=None):
    if header is None:
        dims = "".join(f"{d}, " for d in shape) if len(shape) == 1 else ", ".join(str(d) for d in shape)
        if len(shape) == 1:
            dims = f"{shape[0]},"
        header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': ({dims}), }}"
    pre = 10 if version == 1 else 12
    h = header
    if pad:
        while (pre + len(h) + 1) % 64:
            h += " "
    h += "\n"
    out = b"\x93NUMPY" + bytes([version, 0])
    out += struct.pack("<H" if version == 1 else "<I", len(h))
    out += h.encode("latin-1")
    if data is None:
        count = 1
        for d in shape:
            count *= d
        size = int(descr[2:]) if descr[2:].isdigit() else 8
        fmt = {4: "f", 8: "d", 2: "e"}.get(size, "d")
        endian = ">" if descr[0] == ">" else "<"
        data = b"".join(struct.pack(endian + fmt, 0.25 * i - 1) for i in range(count))
    return out + data


def write(h, name, blob):
    d = os.path.join(ROOT, h)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(blob)


def seeds_npy():
    write("npy", "f8_3x2.npy", npy())
    write("npy", "f4_5.npy", npy("<f4", (5,)))
    write("npy", "f8_scalar.npy", npy("<f8", ()))
    write("npy", "f4_2x3x1x4.npy", npy("<f4", (2, 3, 1, 4)))
    write("npy", "f8_0x3.npy", npy("<f8", (0, 3)))
    write("npy", "f8_v2.npy", npy("<f8", (2, 2), version=2))
    write("npy", "f8_v3.npy", npy("<f8", (4,), version=3))
    write("npy", "f8_big_value.npy", npy("<f8", (2,), data=struct.pack("<dd", 1e300, float("nan"))))
    write("npy", "f8_fortran.npy", npy("<f8", (2, 2), fortran=True))
    write("npy", "be_f8.npy", npy(">f8", (3,)))
    write("npy", "f2.npy", npy("<f2", (3,)))
    write("npy", "truncated.npy", npy("<f8", (3, 2))[:-5])
    write("npy", "trailing.npy", npy("<f8", (2,)) + b"xyz")
    write("npy", "unpadded.npy", npy("<f4", (1, 1), pad=False))
    write("npy", "keys_reordered.npy",
          npy(header="{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}", data=b"\0" * 8))
    write("npy", "long_shape.npy", npy(header="{'descr': '<f8', 'fortran_order': False, "
                                       "'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", data=b"\0" * 8))
    write("npy", "huge_dims.npy", npy(header="{'descr': '<f8', 'fortran_order': False, "
                                      "'shape': (4294967296, 4294967296), }", data=b""))


def seeds_cli_args():
    base = ["--variant", "falcon1", "--form", "recurrent", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy",
            "--beta", "b.npy", "--out", "o.npy"]
    lists = [
        base,
        base + ["--alpha", "a.npy", "--precision", "fp64", "--segment", "100"],
        ["--variant=falcon2", "--form=chunk", "--chunk=8", "--q=q", "--k=k", "--v=v", "--beta=b", "--out=o",
         "--gain=g", "--threads", "2", "--backend", "avx2"],
        ["--variant", "falcon3", "--window", "4", "--form", "parallel", "--q", "q", "--k", "k", "--v", "v",
         "--beta", "b", "--out", "o", "--eps", "1e-3", "--phi", "l2norm", "--align", "same",
         "--checkpoint-in", "ck", "--checkpoint-out", "ck2", "--state-out", "s", "--verbose"],
        ["--help"],
        ["-h"],
        base + ["--eps", "nan"],
        base + ["--window", "12x"],
        base + ["--segment", "0"],
        base + ["--mpfr-bits", "99999999999999999999"],
        ["--q"],
        base + ["--q", "again.npy"],
    ]
    for i, args in enumerate(lists):
        write("cli_args", f"args{i:02d}", b"\0".join(a.encode() for a in args))


def seeds_api():
    rng = random.Random(20240601)
    for i in range(12):
        n = rng.choice([24, 64, 200, 600])
        write("api", f"random{i:02d}", bytes(rng.randrange(256) for _ in range(n)))
    # All fields at their first (valid) choice, values from the usual ranges.
    write("api", "defaults", bytes(20) + bytes(rng.randrange(200) for _ in range(400)))


def seeds_backward():
    # Layout (fuzz/call.h, fuzz_backward.c): variant, align, phi, form,
    # backend (byte - 1: 1 = scalar), precision, eps mode, window, chunk,
    # bits, threads, B, T, H, n, m (table indices), flags (bit 1: alpha;
    # bits 2-3: state kind), the layout byte (0: plain), the inputs' values
    # per step (< 200: in range), then which cotangents are NULL, dO, dS_T,
    # the gradient buffers' byte.
    for v in range(6):
        for prec in (0, 1):
            for form in (0, 1, 2):
                head = bytes([v, v % 2, v % 4 if form == 0 else 0, form, 2, prec, 0, 1, 2, 0, 1,
                              0, 4, 0, 2, 2, 0b1010, 0])
                rng = random.Random(1000 * v + 10 * prec + form)
                values = bytes(rng.randrange(200) for _ in range(70))
                tail = bytes([0]) + bytes(rng.randrange(200) for _ in range(24)) + bytes([0xF0])
                write("backward", f"v{v}_p{prec}_f{form}", head + values + tail)
    rng = random.Random(20261207)
    for i in range(6):
        write("backward", f"random{i:02d}", bytes(rng.randrange(256) for _ in range(rng.choice([24, 120, 400]))))


def seeds_layouts():
    # Packed batches and grouped heads, for the api and backward harnesses
    # (fuzz/call.h): the head as seeds_backward's, with T = 13 (index 6) and
    # H = 2 (index 2), then the layout byte (bits 0-1 packed, 2-3 grouped:
    # 1 valid, 3 a defect; bit 4 tiled; bit 5 a mismatched state off in its
    # heads) and its bytes: grouped first (G - 1 + 4 * (qk_heads != 0)),
    # then packed (seqs - 1, the offsets' steps), then any defect's byte.
    def head(v, prec, form, flags, layout, backend=2, window=0, chunk=2):
        return bytes([v, 0, 0, form, backend, prec, 0, window, chunk, 0, 1, 0, 6, 2, 2, 2, flags, layout])
    packed = bytes([3, 0, 5, 5])                 # 4 sequences: lengths 0, 5, 5, 3
    seeds = {
        "packed_f1_recurrent": head(0, 0, 0, 0b1010, 1) + packed,
        "packed_f3_chunk_fp64": head(2, 1, 1, 0b1010, 1, window=2) + packed,
        "packed_f2_chunk_mpfr": head(1, 1, 1, 0b0110, 1, backend=6) + packed,
        "grouped_interleaved": head(0, 0, 1, 0b1010, 0b0100) + bytes([5]),       # G = 2: H 4, qk_heads 2
        "grouped_tiled_parallel": head(3, 0, 2, 0b0110, 0b10100) + bytes([6]),   # G = 3: H 6, qk_heads 2
        "grouped_qk0": head(0, 1, 0, 0b1010, 0b0100) + bytes([1]),               # qk_heads 0: H
        "packed_grouped_carried": head(0, 0, 0, 0b1010, 0b10101) + bytes([7]) + packed,
        "packed_decreasing": head(0, 0, 0, 0b1010, 3) + packed + bytes([21]),     # cu[3] = cu[2] - 1
        "packed_last_not_T": head(0, 0, 0, 0b1010, 3) + packed + bytes([16]),
        "packed_seqs_0": head(0, 0, 0, 0b1010, 3) + packed + bytes([4]),
        "packed_batch2": head(0, 0, 0, 0b1010, 3) + packed + bytes([3]),
        "packed_no_offsets": head(0, 0, 0, 0b1010, 3) + packed + bytes([6]),
        "packed_state_heads": head(0, 0, 0, 0b1110, 0b100001) + packed,
        "grouped_not_dividing": head(0, 0, 0, 0b1010, 0b1100) + bytes([6, 2]),
        "grouped_head_map": head(0, 0, 0, 0b1010, 0b1100) + bytes([5, 3 + 16]),
    }
    rng = random.Random(20261208)
    for name, h in seeds.items():
        blob = h + bytes(rng.randrange(200) for _ in range(600))
        write("api", name, blob)
        write("backward", name, blob)


def seeds_checkpoint():
    # Layout (fuzz_checkpoint.c): H-1, n-1, m-1, W-1, manifest mode (5 =
    # intact), then per array a mode byte (0 = as expected) and one byte
    # per element (< 240: a valid value).
    def ckpt(H, n, m, W, modes, value=100, manifest=5):
        keep = W - 1
        counts = [H * m * n, H * n, H, H * keep * n, H * keep * m, H]
        out = bytes([H - 1, n - 1, m - 1, W - 1, manifest])
        for mode, c in zip(modes, counts):
            out += bytes([mode]) + bytes([value]) * c
        return out
    write("checkpoint", "valid_h2_n3_m4_w4", ckpt(2, 3, 4, 4, [0] * 6))
    write("checkpoint", "valid_h1_n1_m1_w1", ckpt(1, 1, 1, 1, [0] * 6, value=7))
    write("checkpoint", "f32_arrays", ckpt(3, 2, 2, 2, [13] * 6))
    write("checkpoint", "nan_values", ckpt(1, 2, 2, 3, [0] * 6, value=240))
    write("checkpoint", "inf_values", ckpt(1, 2, 2, 3, [0] * 6, value=241))
    write("checkpoint", "shape_off_by_one", ckpt(2, 2, 3, 2, [12, 0, 0, 0, 0, 0]))
    write("checkpoint", "missing_hist_len", ckpt(2, 2, 3, 2, [0, 0, 0, 0, 0, 15]))
    write("checkpoint", "no_manifest", ckpt(1, 2, 2, 1, [0] * 6, manifest=6))
    write("checkpoint", "raw_manifest_line", bytes([0, 1, 1, 0, 1, 9]) + b"heads 2x\n" + bytes(40))
    rng = random.Random(20261129)
    for i in range(6):
        write("checkpoint", f"random{i:02d}", bytes(rng.randrange(256) for _ in range(rng.choice([16, 80, 300]))))


if __name__ == "__main__":
    seeds_npy()
    seeds_cli_args()
    seeds_api()
    seeds_checkpoint()
    seeds_backward()
    seeds_layouts()
