"""Trainer lowers the loss of the default model; scores and saved models agree with the program; tokenizer goldens."""
import json

import numpy as np
import pytest

import ssm
from conftest import DEFAULT_MODEL, GOLDEN, read_safetensors, run_cli

TEXT = ("And the ship sailed west over the grey water, and the sailors sang of home. " * 40)


def test_trainer_lowers_the_loss_and_saved_model_matches(default_model, tmp_path):
    before = default_model.score(TEXT, seq_len=64)
    trainer = ssm.Trainer(default_model, TEXT, lr=2e-3, steps=12, batch=2, seq_len=64, warmup=0, seed=1)
    losses = [trainer.step() for _ in range(12)]
    assert trainer.finished and trainer.steps_done == 12
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
    after = default_model.score(TEXT, seq_len=64)
    assert after["loss"] < before["loss"]
    with pytest.raises(ssm.Error, match="all 12 steps are done"):
        trainer.step()

    out = tmp_path / "tuned"
    default_model.save(str(out))
    reloaded = ssm.load(str(out), threads=2)
    ids = np.frombuffer(TEXT[:100].encode(), dtype=np.uint8).astype(np.int64)[None, :]
    assert np.array_equal(reloaded.logits(ids), default_model.logits(ids))
    # `ssm score --all` on the saved model computes the same loss.
    data = tmp_path / "data.txt"
    data.write_text(TEXT)
    cli = json.loads(run_cli("score", out, "--data", data, "--all", "--seq-len", 64, "--json", "--threads", 2).stdout)
    assert cli["tokens"] == after["tokens"]
    assert cli["loss"] == pytest.approx(after["loss"], rel=1e-12)


def test_wsla_trains_only_b_and_c_rows(tmp_path):
    model = ssm.load(str(DEFAULT_MODEL), threads=2)
    # After the Trainer is made: it widens a BF16-stored model's weights to F32.
    trainer = ssm.Trainer(model, TEXT, lr=2e-3, steps=2, batch=1, seq_len=32, warmup=0, wsla=True)
    before = {k: v.copy() for k, v in model.parameters().items()}
    trainer.step()
    changed = {k for k, v in model.parameters().items() if not np.array_equal(v, before[k])}
    assert changed and all("in_proj" in k for k in changed)


def test_trainer_refuses_bad_options(default_model):
    with pytest.raises(ssm.Error, match="lr=0"):
        ssm.Trainer(default_model, TEXT, lr=0)
    with pytest.raises(ssm.Error, match="fewer than one window"):
        ssm.Trainer(default_model, "short", seq_len=64)
    with pytest.raises(ssm.Error, match="outside the model's vocabulary"):
        ssm.Trainer(default_model, [1, 2, 999] * 100, seq_len=8)


def test_tokenizer_matches_golden_encodings():
    tok = ssm.Tokenizer.load(str(GOLDEN / "tokenizer" / "tokenizer.json"))
    cases = json.loads((GOLDEN / "tokenizer" / "encodings.json").read_text())
    for case in cases:
        assert tok.encode(case["text"]) == case["ids"], case["text"]
        assert tok.decode(case["ids"]) == case["decoded"]


def test_byte_model_tokenizer_is_raw_bytes(default_model):
    tok = default_model.tokenizer
    assert tok.encode("héllo") == list("héllo".encode())
    assert tok.decode(list("héllo".encode())) == "héllo"
    assert tok.decode([0xC3]) == "\ufffd"  # a cut character decodes, never raises


def test_dropout_trains_as_the_program_does(tmp_path):
    """Trainer(dropout=P) is `ssm train --dropout P`: the same masks from the same seed, the same weights."""
    data = tmp_path / "data.txt"
    data.write_text(TEXT)
    options = dict(lr=2e-3, steps=2, batch=2, seq_len=32, warmup=0, seed=3)

    def in_python(dropout, name):
        model = ssm.load(str(DEFAULT_MODEL), threads=2)
        trainer = ssm.Trainer(model, TEXT, dropout=dropout, **options)
        losses = [trainer.step() for _ in range(2)]
        trainer.save_checkpoint(str(tmp_path / name))
        return losses, read_safetensors(tmp_path / name / "model.safetensors")

    losses, with_dropout = in_python(0.25, "py")
    no_losses, without = in_python(0.0, "py0")
    assert losses[0] != no_losses[0]  # the masks change the first step's loss
    run_cli("train", DEFAULT_MODEL, "--data", data, "--out", tmp_path / "cli", "--holdout", "0", "--dropout", "0.25",
            "--lr", "2e-3", "--steps", "2", "--batch", "2", "--seq-len", "32", "--warmup", "0", "--seed", "3",
            "--threads", "2")
    by_cli = read_safetensors(tmp_path / "cli" / "model.safetensors")
    assert by_cli.keys() == with_dropout.keys()
    for name, value in by_cli.items():
        assert np.array_equal(value, with_dropout[name]), name
    assert any(not np.array_equal(v, without[k]) for k, v in with_dropout.items())
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ssm.Error, match="dropout="):
            ssm.Trainer(ssm.load(str(DEFAULT_MODEL), threads=2), TEXT, dropout=bad, **options)
