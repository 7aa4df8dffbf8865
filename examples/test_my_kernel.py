"""Your kernel under pytest, one test per case of the quick set, judged by
`falcon check`'s own thresholds. Here the kernel is the numpy example
(numpy_falcon.py, beside this file) in float32; put yours in its place.

    PYTHONPATH=python python3 -m pytest -q examples/test_my_kernel.py

A failing case's test fails with the grader's numbers, e.g. (the wrong twin
numpy_falcon.run_case(case, np.float32, bug="decay-after-write")):
    AssertionError: q0054-falcon1-prefix-elu1-random-chunk: out error 6.277e+06 u,
    threshold 33.88 u; state error 4.004e+06 u, threshold 33.63 u (fp32,
    u = 5.96e-08); first bad step t = 1 (batch 0, head 0)
$FALCON_CASES names an already exported set to reuse.
"""
import falcon_suite.testing as ft
import numpy as np

import numpy_falcon  # the kernel under test


@ft.parametrize(profile="quick")
def test_my_kernel(case):
    out, state = numpy_falcon.run_case(case, np.float32)
    ft.assert_case(case, out=out, state=state, precision="fp32")
