#!/usr/bin/env python3
"""The README's quick start, in two steps:

    python3 examples/quickstart.py inputs            q, k, v, beta, alpha .npy here
    python3 examples/quickstart.py error OUT REF     "error: X u" of OUT against REF

inputs: one sequence of T = 2000 steps, n = 32, m = 16, float32, seed 0;
beta 0.5 and alpha 0.99 at every step. error: the normwise relative error
||OUT - REF||_F / ||REF||_F in units of the fp32 roundoff u = 2^-24.
Exits 1 with one line on stderr when this python has no numpy, so that the
quick start stops there instead of running falcon on files never written.
"""
import sys

try:
    import numpy as np
except ImportError:
    sys.exit(f"numpy is missing for {sys.executable}: pip install numpy "
             "(or run with a python that has it)")

T, N, M = 2000, 32, 16


def write_inputs():
    g = np.random.default_rng(0)
    for name, shape in [("q", (T, N)), ("k", (T, N)), ("v", (T, M))]:
        np.save(name + ".npy", g.standard_normal(shape, dtype=np.float32))
    np.save("beta.npy", np.full(T, 0.5, np.float32))
    np.save("alpha.npy", np.full(T, 0.99, np.float32))


def print_error(out_path, ref_path):
    o, r = np.load(out_path), np.load(ref_path)
    print("error: %.2f u" % (np.linalg.norm(o - r) / np.linalg.norm(r) / 2.0**-24))


def main(argv):
    if argv[1:2] == ["inputs"] and len(argv) == 2:
        write_inputs()
    elif argv[1:2] == ["error"] and len(argv) == 4:
        print_error(argv[2], argv[3])
    else:
        sys.exit("usage: quickstart.py inputs | quickstart.py error OUT.npy REF.npy")


if __name__ == "__main__":
    main(sys.argv)
