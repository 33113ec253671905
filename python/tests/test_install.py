"""`cmake --install` puts a package that Debian's interpreter imports from the prefix alone."""
import os
import subprocess
import sys

import pytest

from conftest import GOLDEN


@pytest.mark.skipif("SSM_BUILD_DIR" not in os.environ, reason="needs the build directory (run through ctest)")
def test_installed_package_imports_and_computes(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run([os.environ["SSM_CMAKE"], "--install", os.environ["SSM_BUILD_DIR"], "--prefix", str(prefix)],
                   check=True, capture_output=True)
    site = prefix / os.environ["SSM_PYTHON_INSTALL_DIR"]
    assert (site / "ssm" / "__init__.pyi").exists() and (site / "ssm" / "py.typed").exists()
    code = ("import ssm, sys; m = ssm.load(sys.argv[1], threads=1); "
            "print(ssm.__file__); print(m.logits([[1, 2, 3]]).shape)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    r = subprocess.run([sys.executable, "-c", code, str(GOLDEN / "mamba2_hf_tiny")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, check=True)
    where, shape = r.stdout.split("\n")[:2]
    assert where.startswith(str(site)) and shape == "(1, 3, 256)"
