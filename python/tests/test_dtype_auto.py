"""ssm.load's default dtype (None, as `--dtype auto`): the projections stay in
the dtype the checkpoint stores them in, and compute what an explicit dtype
computes; training refuses low-precision weights instead of training them."""
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
    with pytest.raises(ssm.Error, match="training needs float32 weights"):
        ssm.Trainer(by_default, list(range(40)), steps=1, seq_len=8)


def test_default_keeps_f32_as_stored():
    model = ssm.load(str(GOLDEN / "mamba2_hf_tiny"), threads=2)
    assert model.dtype == "float32"
    assert ssm.load(str(GOLDEN / "mamba2_hf_tiny"), dtype="auto", threads=2).dtype == "float32"
