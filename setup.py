"""`pip install .`: the ssm Python module, built by CMake from this tree.

The extension is the CMake target ssm_python (python/CMakeLists.txt); this
file only runs CMake for the interpreter pip runs under and packages the
result with python/ssm/. Everything the build needs comes from Debian
(scripts/install-deps.sh). SSM_BUILD_DIR picks the build directory (default
build-python/, configured without tests or benchmarks).
"""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        given = os.environ.get("SSM_BUILD_DIR")
        build_dir = pathlib.Path(given) if given else ROOT / "build-python"
        configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DSSM_PYTHON=ON",
                     f"-DPython3_EXECUTABLE={sys.executable}"]
        if not given:  # a directory of its own: only what the module needs
            configure += ["-DCMAKE_BUILD_TYPE=Release", "-DSSM_BUILD_TESTS=OFF", "-DSSM_BUILD_BENCH=OFF"]
        subprocess.run(configure, check=True)
        jobs = os.environ.get("SSM_BUILD_JOBS", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "ssm_python", "-j", jobs], check=True)
        built = build_dir / "python" / "ssm" / pathlib.Path(self.get_ext_filename(ext.name)).name
        dest = pathlib.Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, dest)


setup(
    name="ssm",
    version="0.1.0",
    description="State-space language models (Mamba-2, Mamba-3, hybrids) on the ssm C++ engine",
    packages=["ssm"],
    package_dir={"ssm": "python/ssm"},
    package_data={"ssm": ["__init__.pyi", "py.typed"]},
    ext_modules=[Extension("ssm._ssm", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=[],
    zip_safe=False,
    # setuptools' own scratch space, kept out of the CMake build directories.
    options={"build": {"build_base": "build-python/setuptools"}},
)
