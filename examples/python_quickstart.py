# %% [markdown]
# # ssm from Python
#
# A notebook-style tour (each `# %%` is a cell in VS Code or Jupytext) of the
# `ssm` module on the built-in byte-level model. Run it as a script:
#
#     PYTHONPATH=build/python /usr/bin/python3 examples/python_quickstart.py
#
# (after `cmake --build build --target ssm_python`; or `cmake --install build`
# puts `ssm` into the system Python and no PYTHONPATH is needed).

# %%
import pathlib
import tempfile

import numpy as np

import ssm

root = pathlib.Path(__file__).resolve().parents[1]
model = ssm.load(str(root / "models" / "default"), threads=2)
print(model)
print({k: model.config[k] for k in ("d_model", "n_layer", "vocab_size")})
print(f"{model.parameter_count():,} parameters")

# %% Logits of a batch of token ids: a NumPy array over the engine's memory.
tok = model.tokenizer
ids = np.array([tok.encode("And God said, Let there be light")], dtype=np.int64)
logits = model.logits(ids)
print("logits", logits.shape, logits.dtype)
print("most likely next byte:", repr(tok.decode([int(logits[0, -1].argmax())])))

# %% Generation: greedy, then sampled and streamed piece by piece.
text, state = model.generate("And God said", max_tokens=60, temperature=0)
print(repr(text))
stream, state = model.generate("In the beginning", max_tokens=120, temperature=0.8, seed=1, stream=True)
for piece in stream:
    print(piece, end="", flush=True)
print(f"\n[{stream.finish_reason}, seed {stream.seed}]")

# %% The state is the conversation: copy it, continue it, save it.
# `ssm generate models/default --session chat.state -p "..."` continues the same file.
branch = state.copy()
more, state = model.generate("\nAnd the LORD", max_tokens=60, seed=2, state=state)
print(repr(more))
with tempfile.TemporaryDirectory() as tmp:
    path = pathlib.Path(tmp) / "chat.state"
    branch.save(str(path))
    again, _ = model.generate("\nAnd the LORD", max_tokens=60, seed=2, state=ssm.State.load(str(path), model))
    assert again == more  # the saved branch continues exactly as the live one did
print("consumed:", state.consumed)

# %% Scoring and a few steps of fine-tuning (only the B and C rows with WSLA).
sample = "Blessed are the meek: for they shall inherit the earth. " * 30
print("before:", model.score(sample, seq_len=64))
trainer = ssm.Trainer(model, sample, lr=2e-3, steps=10, batch=2, seq_len=64, warmup=0, wsla=True)
for _ in range(10):
    loss = trainer.step()
print(f"last step loss {loss:.4f}")
print("after: ", model.score(sample, seq_len=64))

# %% Errors are ssm.Error with the engine's message.
try:
    model.logits(np.zeros((1, 4), dtype=np.float32))
except ssm.Error as e:
    print("ssm.Error:", e)
