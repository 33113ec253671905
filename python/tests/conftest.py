"""Shared fixtures: where the goldens, the built program and the default model are.

ctest sets SSM_GOLDEN_DIR, SSM_CLI and SSM_DEFAULT_MODEL (python/CMakeLists.txt);
run by hand, the defaults are the source tree and build/ssm.
"""
import json
import os
import pathlib
import struct
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = pathlib.Path(os.environ.get("SSM_GOLDEN_DIR", ROOT / "tests" / "golden"))
CLI = os.environ.get("SSM_CLI", str(ROOT / "build" / "ssm"))
DEFAULT_MODEL = pathlib.Path(os.environ.get("SSM_DEFAULT_MODEL", ROOT / "models" / "default"))

# Every golden model: safetensors (`*_tiny`) and torch.save (`*_bin`)
# checkpoints, and the downloaded HF families as published (`models/*_hf`).
MODEL_CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "config.json").exists()) + sorted(
    f"models/{p.name}" for p in (GOLDEN / "models").iterdir() if (p / "config.json").exists()
)
# zamba2_hf is left out: HF's own cached decode, which made its gen_output,
# departs from HF's prefill at one step (its notes.json).
GENERATION_CASES = [
    c
    for c in MODEL_CASES
    if c in ("hybrid_tiny", "mamba2_hf_tiny", "mamba3_mimo_tiny", "mamba3_siso_tiny")
    or (c.startswith("models/") and c != "models/zamba2_hf")
]

_NUMPY_DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "F16": np.float16}


def read_safetensors(path):
    """Every tensor of a safetensors file, as NumPy arrays (read here, independently of the engine)."""
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[8 + n + begin : 8 + n + end]
        if info["dtype"] == "BF16":  # the high half of an F32: widened exactly
            wide = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            out[name] = wide.view(np.float32).reshape(info["shape"])
            continue
        out[name] = np.frombuffer(raw, dtype=_NUMPY_DTYPES[info["dtype"]]).reshape(info["shape"])
    return out


def golden(case):
    return read_safetensors(GOLDEN / case / "golden.safetensors")


def run_cli(*args, check=True):
    """Runs the built `ssm` program; returns the CompletedProcess (text)."""
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"ssm {' '.join(map(str, args))} exited {r.returncode}: {r.stderr}")
    return r


def cli_generated_ids(stdout, prompt_len):
    """The new ids of `ssm generate --print-ids` (its line: this run's prompt ids, then the new ones)."""
    ids = [int(x) for x in stdout.strip().split(",") if x]
    return ids[prompt_len:]


@pytest.fixture
def default_model():
    import ssm

    return ssm.load(str(DEFAULT_MODEL), threads=2)
