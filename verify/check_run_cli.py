#!/usr/bin/env python3
"""Run the falcon CLI as the implementation under test on every case of an
exported set: for each case, `falcon run` with the case's configuration,
its inputs and its initial state (the checkpoint), writing
RDIR/<case>/out.npy and state.npy for `falcon check`.

  check_run_cli.py FALCON CASES RDIR [--backend B] [--precision fp32|fp64]
                   [--form-of-case | --form F]
"""
import json
import os
import subprocess
import sys


def main(argv):
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("falcon")
    p.add_argument("cases")
    p.add_argument("results")
    p.add_argument("--backend", default="auto")
    p.add_argument("--precision", default="fp32")
    a = p.parse_args(argv)
    with open(os.path.join(a.cases, "index.json")) as f:
        index = json.load(f)
    failed = 0
    for row in index["cases"]:
        d = os.path.join(a.cases, row["dir"])
        with open(os.path.join(d, "case.json")) as f:
            c = json.load(f)
        out = os.path.join(a.results, c["name"])
        os.makedirs(out, exist_ok=True)
        args = [a.falcon, "run", "--variant", c["variant"], "--form", c["form"], "--align", c["align"],
                "--phi", c["phi"], "--eps", repr(c["eps"]), "--window", str(c["window"]),
                "--chunk", str(c["chunk"]), "--backend", a.backend, "--precision", a.precision,
                "--threads", "1", "--checkpoint-in", os.path.join(d, c["state_in"]),
                "--out", os.path.join(out, "out.npy"), "--state-out", os.path.join(out, "state.npy")]
        for name, file in c["inputs"].items():
            if file:
                args += ["--" + name, os.path.join(d, file)]
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode:
            failed += 1
            sys.stderr.write("%s: falcon run failed: %s" % (c["name"], r.stderr))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
