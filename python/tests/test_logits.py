"""Logits from Python: bit for bit those of `ssm logits`, and within the golden tolerance of the references."""
import numpy as np
import pytest

import ssm
from conftest import GOLDEN, MODEL_CASES, golden, read_safetensors, run_cli


def max_rel_error(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b)) / max(np.max(np.abs(b)), 1e-30))


@pytest.mark.parametrize("case", MODEL_CASES)
def test_logits_equal_cli_bit_for_bit(case, tmp_path):
    model = ssm.load(str(GOLDEN / case), threads=2)
    g = golden(case)
    ours = model.logits(g["input_ids"])
    out = tmp_path / "logits.safetensors"
    run_cli("logits", GOLDEN / case, "--input", GOLDEN / case / "golden.safetensors", "--output", out, "--threads", 2)
    cli = read_safetensors(out)["logits"]
    assert ours.dtype == np.float32 and ours.shape == cli.shape
    assert np.array_equal(ours.view(np.uint32), cli.view(np.uint32))
    # And the reference implementation's, at SPEC's tolerance.
    assert max_rel_error(ours, g["logits"]) <= (5e-4 if case == "mamba2_ssm_tiny" else 1e-4)


def test_int32_strided_and_list_ids_give_the_same_logits():
    model = ssm.load(str(GOLDEN / "mamba3_siso_tiny"), threads=2)
    ids = golden("mamba3_siso_tiny")["input_ids"]
    want = model.logits(ids)
    assert np.array_equal(model.logits(ids.astype(np.int32)), want)
    wide = np.zeros((ids.shape[0], ids.shape[1] * 2), dtype=np.int64)
    wide[:, ::2] = ids
    assert np.array_equal(model.logits(wide[:, ::2]), want)  # a strided view is copied, not misread
    assert np.array_equal(model.logits(ids.tolist()), want)


def test_logits_array_owns_engine_memory_and_outlives_model():
    model = ssm.load(str(GOLDEN / "mamba2_hf_tiny"), threads=1)
    ids = golden("mamba2_hf_tiny")["input_ids"]
    out = model.logits(ids)
    want = out.copy()
    assert not out.flags.owndata  # a view over the engine's tensor, not a copy
    del model
    assert np.array_equal(out, want)


def test_ref_backend_agrees_with_cpu():
    ids = golden("mamba2_hf_tiny")["input_ids"]
    cpu = ssm.load(str(GOLDEN / "mamba2_hf_tiny"), threads=2).logits(ids)
    ref_model = ssm.load(str(GOLDEN / "mamba2_hf_tiny"), backend="ref", threads=2)
    assert ref_model.backend == "ref"
    assert max_rel_error(ref_model.logits(ids), cpu) <= 1e-4


def test_forward_split_through_a_state_equals_whole():
    model = ssm.load(str(GOLDEN / "hybrid_tiny"), threads=2)
    ids = golden("hybrid_tiny")["input_ids"]
    whole = model.logits(ids)
    first, state = model.forward(ids[:, :10])
    assert state.consumed == [10, 10]
    second, same = model.forward(ids[:, 10:], state)
    assert same is state and state.consumed == [ids.shape[1]] * 2
    assert max_rel_error(np.concatenate([first, second], axis=1), whole) <= 1e-4


def test_parameters_are_views_of_the_model():
    model = ssm.load(str(GOLDEN / "mamba2_ssm_tiny"), threads=1)
    params = model.parameters()
    assert sum(p.size for p in params.values()) == model.parameter_count()
    ids = golden("mamba2_ssm_tiny")["input_ids"]
    before = model.logits(ids)
    norm = next(v for k, v in params.items() if k.endswith("norm_f.weight"))
    norm *= 2.0  # writes through to the model
    assert not np.array_equal(model.logits(ids), before)
    norm /= 2.0
    assert np.array_equal(model.logits(ids), before)
    assert model.config["vocab_size"] == model.vocab_size


@pytest.mark.parametrize("dtype", ["bfloat16", "int8"])
def test_low_precision_weights_equal_cli_dtype(dtype, tmp_path):
    # dtype= converts as `ssm logits --dtype` does: the same bits, and close to float32.
    case = "mamba2_hf_tiny"
    g = golden(case)
    ours = ssm.load(str(GOLDEN / case), dtype=dtype, threads=2).logits(g["input_ids"])
    out = tmp_path / "logits.safetensors"
    cli_dtype = {"bfloat16": "bf16", "int8": "int8"}[dtype]
    run_cli("logits", GOLDEN / case, "--input", GOLDEN / case / "golden.safetensors", "--output", out,
            "--threads", 2, "--dtype", cli_dtype)
    assert np.array_equal(ours.view(np.uint32), read_safetensors(out)["logits"].view(np.uint32))
    f32 = ssm.load(str(GOLDEN / case), threads=2).logits(g["input_ids"])
    assert not np.array_equal(ours, f32)
    assert max_rel_error(ours, f32.astype(np.float64)) < 5e-2
