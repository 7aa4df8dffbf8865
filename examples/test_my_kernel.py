"""Your kernel under pytest, one test per case of the quick set, judged by
`falcon check`'s own thresholds. Here the kernel is the numpy example
(numpy_falcon.py, beside this file) in float32; put yours in its place.

    PYTHONPATH=python python3 -m pytest -q examples/test_my_kernel.py

A failing case reads, e.g.
    AssertionError: q0036-falcon1-prefix-relu-strong-chunk-carried: out error
    3.1e+05 u, threshold 90.1 u; ... (fp32, u = 5.96e-08); first bad step t = 0 (batch 0, head 0)
$FALCON_CASES names an already exported set to reuse.
"""
import falcon_suite.testing as ft
import numpy as np

import numpy_falcon  # the kernel under test


@ft.parametrize(profile="quick")
def test_my_kernel(case):
    out, state = numpy_falcon.run_case(case, np.float32)
    ft.assert_case(case, out=out, state=state, precision="fp32")
