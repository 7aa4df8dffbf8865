"""Builds falcon_suite with the suite's shared libraries inside it.

`pip install ./python` from a source tree runs `make` in the tree's root
for the libraries falcon_suite/_lib.py lists (LIBRARIES: the required ones,
and each optional one the Makefile has a rule for) and copies each one
built into falcon_suite/_libs/ of the wheel, so that an installed package
loads them with no environment variable.

  FALCON_BUILD_DIR  take the libraries already built there (e.g. build-asan)
                    instead of running make
  FALCON_MAKE       the make command (default: make -j<cores>)
"""
import importlib.util
import os
import shlex
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def library_list():
    """_lib.LIBRARIES, read from the file (importing the package would need
    numpy and the libraries themselves)."""
    spec = importlib.util.spec_from_file_location("_falcon_lib", os.path.join(HERE, "falcon_suite", "_lib.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.LIBRARIES, mod.BUNDLE_DIR


def build_dir(libraries):
    """The folder holding the built libraries: $FALCON_BUILD_DIR as it is, or
    build/ of the source tree after `make` of the required ones."""
    given = os.environ.get("FALCON_BUILD_DIR")
    if given:
        return os.path.abspath(given)
    if not os.path.exists(os.path.join(ROOT, "Makefile")):
        raise SystemExit("falcon_suite: no source tree above %s to build libfalcon in; "
                         "set FALCON_BUILD_DIR to a folder holding the built libraries" % HERE)
    make = shlex.split(os.environ.get("FALCON_MAKE", "make -j%d" % (os.cpu_count() or 1)))
    targets = ["build/" + lib.filename for lib in libraries if lib.required or has_rule(make, lib)]
    subprocess.check_call(make + ["-C", ROOT] + targets)
    return os.path.join(ROOT, "build")


def has_rule(make, lib):
    """Whether the Makefile can build an optional library (make -n: dry run)."""
    return subprocess.call(make + ["-n", "-C", ROOT, "build/" + lib.filename],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0


class BuildWithLibraries(build_py):
    """build_py, then the libraries copied into the package (symlinks
    resolved: the wheel holds the files)."""

    def run(self):
        super().run()
        libraries, bundle = library_list()
        src = build_dir(libraries)
        dst = os.path.join(self.build_lib, "falcon_suite", bundle)
        os.makedirs(dst, exist_ok=True)
        for lib in libraries:
            path = os.path.join(src, lib.filename)
            if os.path.exists(path):
                shutil.copyfile(path, os.path.join(dst, lib.filename))
            elif lib.required:
                raise SystemExit("falcon_suite: %s was not built in %s" % (lib.filename, src))


class BinaryDistribution(Distribution):
    """The wheel carries native libraries: a platform wheel, not py3-none-any."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibraries}, distclass=BinaryDistribution)
