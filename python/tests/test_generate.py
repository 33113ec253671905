"""Generation from Python: the reference's greedy tokens, and the same text `ssm generate` writes."""
import pytest

import ssm
from conftest import DEFAULT_MODEL, GENERATION_CASES, GOLDEN, golden, run_cli


@pytest.mark.parametrize("case", GENERATION_CASES)
def test_greedy_generation_equals_golden(case):
    g = golden(case)
    prompt, expected = g["gen_prompt"][0].tolist(), g["gen_output"][0].tolist()
    model = ssm.load(str(GOLDEN / case), threads=2)
    new, state = model.generate(prompt, max_tokens=len(expected) - len(prompt), temperature=0, ignore_eos=True)
    assert prompt + new == expected
    # Everything but the last token is consumed; the last waits as pending.
    assert state.consumed == [len(expected) - 1] and state.pending == [expected[-1]]
    streamed, _ = model.generate(prompt, max_tokens=len(expected) - len(prompt), temperature=0, ignore_eos=True,
                                 stream=True)
    assert prompt + list(streamed) == expected


def test_sampled_text_equals_cli(default_model):
    args = dict(max_tokens=60, temperature=0.9, top_k=30, top_p=0.9, min_p=0.02, repetition_penalty=1.1, seed=7)
    text, _ = default_model.generate("And God said", **args)
    cli = run_cli("generate", DEFAULT_MODEL, "-p", "And God said", "-n", 60, "--temperature", 0.9, "--top-k", 30,
                  "--top-p", 0.9, "--min-p", 0.02, "--repeat-penalty", 1.1, "--seed", 7, "-q", "--threads", 2)
    assert text == cli.stdout
    assert len(text) > 0


def test_stream_pieces_join_to_the_text(default_model):
    text, _ = default_model.generate("In the beginning", max_tokens=50, seed=3)
    stream, state = default_model.generate("In the beginning", max_tokens=50, seed=3, stream=True)
    with pytest.raises(ssm.Error, match="streaming generation"):
        state.copy()  # in use until the stream ends
    pieces = list(stream)
    assert "".join(pieces) == text == stream.text
    assert len(pieces) > 1 and stream.seed == 3 and stream.finish_reason == "length"
    assert stream.state is state and state.copy().consumed == state.consumed


def test_stop_string_ends_the_text_before_it(default_model):
    full, _ = default_model.generate("And the LORD said", max_tokens=80, temperature=0)
    stop = full[10:13]
    text, _ = default_model.generate("And the LORD said", max_tokens=80, temperature=0, stop=[stop])
    assert stop not in text and full.startswith(text) and len(text) <= 12


def test_closing_a_stream_keeps_the_state_reached(default_model):
    stream, state = default_model.generate("And", max_tokens=5000, seed=1, stream=True)
    next(stream)
    with pytest.raises(ssm.Error, match="streaming generation of this model is still running"):
        default_model.logits([[1, 2]])  # would otherwise wait for all 5000 tokens
    stream.close()
    assert default_model.logits([[1, 2]]).shape == (1, 2, 256)
    assert stream.finish_reason == "interrupt"
    assert 1 <= state.consumed[0] < 5000
    more, _ = default_model.generate("", max_tokens=3, seed=1, state=state)  # continues from its pending token
    assert isinstance(more, str)


def test_max_tokens_zero_only_reads_the_prompt(default_model):
    text, state = default_model.generate("abc", max_tokens=0)
    assert text == "" and state.consumed == [3] and state.pending == [None]


def test_ctrl_c_stops_generation_and_keeps_the_state(default_model):
    import _thread
    import threading

    state = ssm.State(default_model)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        default_model.generate("And", max_tokens=1_000_000, ignore_eos=True, seed=1, state=state)
    timer.join()
    reached = state.consumed[0]
    assert 1 <= reached < 1_000_000 and state.pending[0] is not None
    more, _ = default_model.generate("", max_tokens=2, ignore_eos=True, seed=1, state=state)
    assert state.consumed[0] == reached + 2


def test_compute_releases_the_gil(default_model):
    import threading
    import time

    started, result = threading.Event(), {}

    def work():
        started.set()
        result["text"], _ = default_model.generate("And", max_tokens=1000, ignore_eos=True, seed=1)

    t = threading.Thread(target=work)
    t.start()
    started.wait()
    time.sleep(0.05)
    # This line runs while the generation does: it cannot hold the GIL.
    assert t.is_alive() and "text" not in result
    t.join()
    assert len(result["text"]) > 0
