"""ssm.load's default dtype (None, as `--dtype auto`): the projections stay in
the dtype the checkpoint stores them in, and compute what an explicit dtype
computes; training widens 16-bit weights to float32 master weights (exactly)
and refuses int8 ones."""
import json

import numpy as np
import pytest

import ssm
from conftest import GOLDEN, run_cli

CONFIG = {"architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": 64,
          "num_hidden_layers": 2, "vocab_size": 512, "tie_word_embeddings": False}


@pytest.fixture(scope="module")
def bf16_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dtype_auto")
    (tmp / "config.json").write_text(json.dumps(CONFIG))
    run_cli("init", "--config", tmp / "config.json", "--out", tmp / "bf16", "--dtype", "bf16", "--seed", "3")
    return tmp / "bf16"


def test_default_keeps_bf16_as_stored(bf16_model):
    ids = np.array([[3, 17, 42, 9, 300]], dtype=np.int64)
    by_default = ssm.load(str(bf16_model), threads=2)
    assert by_default.dtype == "bfloat16"
    explicit = ssm.load(str(bf16_model), dtype="bfloat16", threads=2)
    assert np.array_equal(by_default.logits(ids).view(np.uint32), explicit.logits(ids).view(np.uint32))
    assert ssm.load(str(bf16_model), dtype="float32", threads=2).dtype == "float32"
    with pytest.raises(ssm.Error, match="dtype='float32'"):
        by_default.parameters()


def test_trainer_widens_bf16_to_float32_master_weights(bf16_model):
    data = list(range(40))
    as_stored = ssm.load(str(bf16_model), threads=2)
    wide = ssm.load(str(bf16_model), dtype="float32", threads=2)
    trainers = [ssm.Trainer(m, data, steps=2, seq_len=8, batch=2, warmup=0, seed=5) for m in (as_stored, wide)]
    assert as_stored.dtype == "float32"
    wide_parameters = wide.parameters()
    for name, value in as_stored.parameters().items():
        assert np.array_equal(value, wide_parameters[name]), name  # widened exactly, before any step
    for _ in range(2):
        assert trainers[0].step() == trainers[1].step()
    trained = wide.parameters()
    for name, value in as_stored.parameters().items():
        assert np.array_equal(value, trained[name]), name
    with pytest.raises(ssm.Error, match="int8"):
        ssm.Trainer(ssm.load(str(bf16_model), dtype="int8", threads=2), data, steps=1, seq_len=8)


def test_default_keeps_f32_as_stored():
    model = ssm.load(str(GOLDEN / "mamba2_hf_tiny"), threads=2)
    assert model.dtype == "float32"
    assert ssm.load(str(GOLDEN / "mamba2_hf_tiny"), dtype="auto", threads=2).dtype == "float32"
