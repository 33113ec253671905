"""ssm: state-space language models (Mamba-2/SSD, Mamba-3, hybrids with attention).

The classes are the engine's own, compiled in ssm._ssm from the library the
`ssm` program uses; nothing of the model runs in Python. Compute releases
the GIL; every error the engine reports raises ssm.Error.

    import ssm
    model = ssm.load("models/default")
    text, state = model.generate("And God said", max_tokens=40, temperature=0)
"""

from ._ssm import Error, Model, State, Stream, Tokenizer, Trainer, load

__all__ = ["Error", "Model", "State", "Stream", "Tokenizer", "Trainer", "load"]
__version__ = "0.1.0"
