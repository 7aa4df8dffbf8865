"""falcon_suite: Python access to libfalcon and to the suite's case sets.

    import falcon_suite
    out, S = falcon_suite.run(q, k, v, beta, alpha, variant="falcon1", precision="fp32")
    ref, S_ref = falcon_suite.reference(q, k, v, beta, alpha, variant="falcon1")
    g = falcon_suite.grad(q, k, v, beta, alpha, dO=dO, variant="falcon1")   # g["dq"], ...
    falcon_suite.export_cases("cases", profile="quick")
    ... run your kernel, falcon_suite.write_result("results", name, out, state) ...
    assert falcon_suite.check("cases", "results", precision="fp32").passed

Each shared library (libfalcon.so, libfalcon-grade.so for export and
check, libfalcon-ref.so for the MPFR reference) is found through its
environment variable ($FALCON_LIB, $FALCON_GRADE_LIB, $FALCON_REF_LIB),
else beside the libfalcon in use, else the copy an
installed wheel carries, else build/ of the source tree this package lives
in, else the system's. Pure ctypes and numpy: nothing is compiled here.
"""
import sys

try:
    import numpy  # noqa: F401  (the one dependency: a hint, not a traceback from deep inside)
except ImportError:
    raise ImportError("falcon_suite needs numpy: pip install numpy (for %s)" % sys.executable) from None

from ._lib import FalconError, lib_path, library_paths  # noqa: E402
from .api import State, reference, run, run_pool  # noqa: E402
from .grad import grad, torch_run  # noqa: E402
from .cases import (  # noqa: E402
    CheckInputError, CheckResult, check, export_cases, load_case,
    load_checkpoint, write_manifest, write_result)

__version__ = "0.1.0"

# Unit roundoff of each precision a result can be judged in.
UNIT_ROUNDOFF = {"fp64": 2.0 ** -53, "fp32": 2.0 ** -24, "tf32": 2.0 ** -11,
                 "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}

__all__ = ["FalconError", "CheckInputError", "CheckResult", "State", "run", "run_pool", "reference", "grad", "torch_run",
           "export_cases", "check", "load_case", "load_checkpoint", "write_result",
           "write_manifest", "lib_path", "library_paths", "UNIT_ROUNDOFF"]
