"""Builds qsmcore's extension module with CMake for `pip install .` (see pyproject.toml).

Two ways:
- QSMCORE_BUILD_DIR names a CMake build tree where the module is already built (tools/python.sh:
  the Release tree in build/); its ``python/qsmcore/_qsmcore*.so`` is packaged as is.
- otherwise the repository is configured and the ``_qsmcore`` target built in
  ``build/setuptools/cmake`` with this interpreter, without the C++ tests.
"""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# setuptools' default "build/" is the CMake tree's folder: keep its files in a subfolder.
BUILD_BASE = os.path.join("build", "setuptools")


def cmake_build(build_dir: str) -> None:
    args = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DQSM_BUILD_TESTS=OFF",
            "-DQSM_BUILD_PYTHON=ON", f"-DPython_EXECUTABLE={sys.executable}"]
    try:
        import pybind11  # the PyPI wheel carries the CMake config; Debian's is in /usr/lib/cmake
        args.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
    except ImportError:
        pass
    if shutil.which("ninja"):
        args += ["-G", "Ninja"]
    subprocess.check_call(args)
    subprocess.check_call(["cmake", "--build", build_dir, "--target", "qsmcore_python", "--parallel"])


class CMakeBuildExt(build_ext):
    def build_extension(self, ext: Extension) -> None:
        build_dir = os.environ.get("QSMCORE_BUILD_DIR")
        if not build_dir:
            build_dir = os.path.join(ROOT, BUILD_BASE, "cmake")
            cmake_build(build_dir)
        built = glob.glob(os.path.join(build_dir, "python", "qsmcore", "_qsmcore*.so"))
        if not built:
            raise RuntimeError(f"no _qsmcore module in {build_dir}/python/qsmcore: build the qsmcore_python target")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)


os.makedirs(os.path.join(ROOT, BUILD_BASE), exist_ok=True)
setup(
    ext_modules=[Extension("qsmcore._qsmcore", sources=[])],
    cmdclass={"build_ext": CMakeBuildExt},
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
)
