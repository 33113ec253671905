"""Bad input raises ssm.Error with a message that says what is wrong."""
import numpy as np
import pytest

import ssm
from conftest import GOLDEN, golden

CASE = "mamba2_hf_tiny"


@pytest.fixture(scope="module")
def model():
    return ssm.load(str(GOLDEN / CASE), threads=1)


@pytest.mark.parametrize("ids, message", [
    (np.zeros((1, 4), dtype=np.float32), "int32 or int64 array, got dtype float32"),
    (np.zeros((1, 4), dtype=np.int16), "int32 or int64 array, got dtype int16"),
    (np.zeros(4, dtype=np.int64), "rank 2 \\(batch, length\\), got rank 1"),
    (np.zeros((1, 2, 3), dtype=np.int64), "rank 2 \\(batch, length\\), got rank 3"),
    (np.zeros((1, 0), dtype=np.int64), "empty"),
    ([["a", "b"]], "got dtype <U1"),
])
def test_bad_ids(model, ids, message):
    with pytest.raises(ssm.Error, match="Model.logits: .*" + message):
        model.logits(ids)


def test_ids_outside_the_vocabulary(model):
    with pytest.raises(ssm.Error, match="vocab|outside"):
        model.logits(np.array([[1, 2, model.vocab_size]]))
    with pytest.raises(ssm.Error, match="outside the model's vocabulary"):
        model.generate([1, -1], max_tokens=1)


def test_missing_model(tmp_path):
    with pytest.raises(ssm.Error, match="no-such-model"):
        ssm.load(str(tmp_path / "no-such-model"))


def test_bad_load_arguments():
    with pytest.raises(ssm.Error, match="backend"):
        ssm.load(str(GOLDEN / CASE), backend="tpu")
    with pytest.raises(ssm.Error, match="dtype=float64: the projection weights can be"):
        ssm.load(str(GOLDEN / CASE), dtype="float64")
    with pytest.raises(ssm.Error, match="threads=0"):
        ssm.load(str(GOLDEN / CASE), threads=0)
    with pytest.raises(ssm.Error, match="max-memory|memory"):
        ssm.load(str(GOLDEN / CASE), max_memory=1000)


def test_bad_generation_arguments(model):
    with pytest.raises(ssm.Error, match="max_tokens=-1"):
        model.generate([1], max_tokens=-1)
    with pytest.raises(ssm.Error, match="top_p|top-p"):
        model.generate([1], top_p=0)
    with pytest.raises(ssm.Error, match="temperature"):
        model.generate([1], temperature=-1)
    with pytest.raises(ssm.Error, match="stop string is empty"):
        model.generate([1], stop=[""])
    with pytest.raises(ssm.Error, match="no token to start from"):
        model.generate([], max_tokens=1)
    with pytest.raises(ssm.Error, match="rank 1"):
        model.generate([[1, 2]], max_tokens=1)


def test_attention_caches_beyond_memory_are_refused():
    hybrid = ssm.load(str(GOLDEN / "hybrid_tiny"), threads=1)
    with pytest.raises(ssm.Error, match="max_tokens=1000000000000: the attention caches would need"):
        hybrid.generate([1], max_tokens=10**12)


def test_state_batch_must_match(model):
    ids = golden(CASE)["input_ids"]
    _, state = model.forward(ids[:1])
    with pytest.raises(ssm.Error, match="holds 1 sequences but ids has 2 rows"):
        model.forward(ids, state)
    with pytest.raises(ssm.Error, match="generate continues one"):
        model.generate([1], state=ssm.State(model, batch=2))


def test_model_without_tokenizer_cannot_take_text(tmp_path):
    # mamba2_hf_tiny's vocabulary is bytes-sized, so it reads text byte for byte;
    # a tokenizer file that is not one is refused by name.
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{ not json")
    with pytest.raises(ssm.Error, match="tokenizer.json"):
        ssm.Tokenizer.load(str(bad))


def test_error_is_a_runtime_error():
    assert issubclass(ssm.Error, RuntimeError)
