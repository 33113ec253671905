"""States as Python objects: saved from Python, continued by `ssm generate --session`, and the reverse."""
import numpy as np
import pytest

import ssm
from conftest import GOLDEN, cli_generated_ids, golden, run_cli

CASE = "mamba3_siso_tiny"
GREEDY = dict(temperature=0, ignore_eos=True)


def cli_continue(session, prompt, n):
    r = run_cli("generate", GOLDEN / CASE, "--session", session, "--prompt-ids", ",".join(map(str, prompt)),
                "--print-ids", "--temperature", 0, "--max-tokens", n, "--ignore-eos", "-q", "--threads", 2)
    return cli_generated_ids(r.stdout, len(prompt))


@pytest.fixture
def model():
    return ssm.load(str(GOLDEN / CASE), threads=2)


def test_state_saved_from_python_continues_in_cli(model, tmp_path):
    first, state = model.generate([5, 6, 7, 8], max_tokens=6, **GREEDY)
    path = tmp_path / "chat.state"
    state.save(str(path))
    in_python, _ = model.generate([9, 10], max_tokens=8, state=state, **GREEDY)
    assert cli_continue(path, [9, 10], 8) == in_python
    # And exactly what one uninterrupted sequence would have produced.
    whole, _ = model.generate([5, 6, 7, 8] + first + [9, 10], max_tokens=8, **GREEDY)
    assert whole == in_python


def test_state_saved_by_cli_continues_in_python(model, tmp_path):
    path = tmp_path / "chat.state"
    first = cli_continue(path, [1, 2, 3], 5)
    state = ssm.State.load(str(path), model)
    assert state.consumed == [3 + 5 - 1] and state.pending == [first[-1]]
    from_cli, _ = model.generate([4], max_tokens=7, state=state, **GREEDY)
    _, mine = model.generate([1, 2, 3], max_tokens=5, **GREEDY)
    in_python, _ = model.generate([4], max_tokens=7, state=mine, **GREEDY)
    assert from_cli == in_python


def test_copy_is_independent(model):
    _, state = model.generate([3, 1, 4, 1, 5], max_tokens=4, **GREEDY)
    twin = state.copy()
    a, _ = model.generate([9], max_tokens=6, state=state, **GREEDY)
    assert twin.consumed == [5 + 4 - 1] and state.consumed != twin.consumed
    b, _ = model.generate([9], max_tokens=6, state=twin, **GREEDY)
    assert a == b


def test_forward_continues_after_generate(model):
    ids = golden(CASE)["input_ids"][:1]
    _, state = model.generate(ids[0, :9].tolist(), max_tokens=1, **GREEDY)
    # The state holds 9 prompt tokens plus one pending: feed the rest after it.
    pending = state.pending[0]
    logits, _ = model.forward(ids[:, 10:], state)
    seq = np.concatenate([ids[:, :9], [[pending]], ids[:, 10:]], axis=1)
    whole = model.logits(seq)
    assert np.max(np.abs(logits - whole[:, 10:])) <= 1e-4 * np.max(np.abs(whole))


def test_foreign_and_damaged_state_files_raise(model, tmp_path):
    other = ssm.load(str(GOLDEN / "mamba2_hf_tiny"), threads=1)
    _, state = other.generate([1, 2], max_tokens=2, **GREEDY)
    foreign = tmp_path / "other.state"
    state.save(str(foreign))
    with pytest.raises(ssm.Error, match="other.state"):
        ssm.State.load(str(foreign), model)
    junk = tmp_path / "junk.state"
    junk.write_bytes(b"not a state file at all")
    with pytest.raises(ssm.Error, match="junk.state"):
        ssm.State.load(str(junk), model)
    with pytest.raises(ssm.Error, match="missing.state"):
        ssm.State.load(str(tmp_path / "missing.state"), model)
    with pytest.raises(ssm.Error, match="another Model"):
        model.generate([1], max_tokens=1, state=state)


def test_sampled_text_session_continues_identically_in_cli(default_model, tmp_path):
    from conftest import DEFAULT_MODEL

    _, state = default_model.generate("And God said", max_tokens=30, seed=4)
    path = tmp_path / "kjv.state"
    state.save(str(path))
    mine, _ = default_model.generate(" unto Moses", max_tokens=40, seed=9, state=state.copy())
    r = run_cli("generate", DEFAULT_MODEL, "--session", path, "-p", " unto Moses", "-n", 40, "--seed", 9, "-q",
                "--threads", 2)
    assert r.stdout == mine
    # The program saved its continuation back: it equals ours, continued once more.
    theirs = ssm.State.load(str(path), default_model)
    assert theirs.consumed == [state.consumed[0] + 1 + len(" unto Moses") + 40 - 1]
