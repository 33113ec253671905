# Type hints for the ssm package (the classes live in the extension ssm._ssm).
from typing import Any, Iterator, Literal, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

__version__: str

IdsLike = Union[npt.NDArray[np.int32], npt.NDArray[np.int64], Sequence[Sequence[int]]]

class Error(RuntimeError):
    """An error the engine reports: a bad file, config, argument or input."""

def load(
    path: str,
    backend: str = "cpu",
    dtype: Optional[str] = None,
    threads: Optional[int] = None,
    max_memory: Optional[int] = None,
) -> Model:
    """Load a model directory (safetensors, sharded safetensors or pytorch_model.bin).

    backend: "cpu" (fast) or "ref" (the scalar reference). dtype: the projection
    weights once loaded: None (or "auto", the default) keeps the dtype the
    checkpoint stores them in (float32 when stored in several dtypes), or
    "float32", "bfloat16", "float16", "int8" with a scale per row, as
    `ssm --dtype`; the rest stays float32. Model.parameters() needs
    float32 projections; Trainer widens bfloat16/float16 ones to float32
    master weights in place. threads: default every core.
    """

class Tokenizer:
    @staticmethod
    def load(path: str) -> Tokenizer: ...
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: Sequence[int], skip_special: bool = False) -> str: ...
    def token_to_id(self, token: str) -> Optional[int]: ...
    @property
    def vocab_size(self) -> int: ...

class State:
    """The recurrent state of a batch of sequences (a generation session)."""
    def __init__(self, model: Model, batch: int = 1) -> None: ...
    def save(self, path: str) -> None:
        """Write the state file, fingerprinted with the model (as `ssm generate --session`)."""
    @staticmethod
    def load(path: str, model: Model) -> State: ...
    def copy(self) -> State: ...
    def __copy__(self) -> State: ...
    def __deepcopy__(self, memo: Any) -> State: ...
    @property
    def model(self) -> Model: ...
    @property
    def batch(self) -> int: ...
    @property
    def consumed(self) -> list[int]: ...
    @property
    def pending(self) -> list[Optional[int]]: ...

class Stream(Iterator[Any]):
    """A running generation: yields str pieces for a text prompt, int ids for an ids prompt."""
    def __iter__(self) -> Stream: ...
    def __next__(self) -> Any: ...
    def close(self) -> None: ...
    @property
    def text(self) -> str: ...
    @property
    def tokens(self) -> list[int]: ...
    @property
    def finish_reason(self) -> str:
        """"length", "stop token", "stop string" or "interrupt" (close() or Ctrl-C)."""
    @property
    def seed(self) -> int: ...
    @property
    def state(self) -> State: ...

class Model:
    @property
    def path(self) -> str: ...
    @property
    def config(self) -> dict[str, Any]: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def backend(self) -> str: ...
    @property
    def threads(self) -> int: ...
    @property
    def dtype(self) -> str:
        """The projections' dtype as loaded: "float32", "bfloat16", "float16" or "int8"."""
    @property
    def tokenizer(self) -> Tokenizer: ...
    def parameters(self) -> dict[str, npt.NDArray[np.float32]]: ...
    def parameter_count(self) -> int: ...
    def logits(self, ids: IdsLike) -> npt.NDArray[np.float32]:
        """(batch, length, vocab) logits of (batch, length) token ids."""
    def forward(self, ids: IdsLike, state: Optional[State] = None) -> Tuple[npt.NDArray[np.float32], State]: ...
    @overload
    def generate(self, prompt: str, *, max_tokens: int = 256, temperature: float = 0.8, top_k: int = 40,
                 top_p: float = 0.95, min_p: float = 0.05, repetition_penalty: float = 1.0,
                 repeat_last_n: int = 64, stop: Optional[Sequence[str]] = None,
                 stop_ids: Optional[Sequence[int]] = None, ignore_eos: bool = False,
                 seed: Optional[int] = None, state: Optional[State] = None,
                 stream: Literal[False] = False) -> Tuple[str, State]: ...
    @overload
    def generate(self, prompt: Sequence[int], *, max_tokens: int = 256, temperature: float = 0.8, top_k: int = 40,
                 top_p: float = 0.95, min_p: float = 0.05, repetition_penalty: float = 1.0,
                 repeat_last_n: int = 64, stop: Optional[Sequence[str]] = None,
                 stop_ids: Optional[Sequence[int]] = None, ignore_eos: bool = False,
                 seed: Optional[int] = None, state: Optional[State] = None,
                 stream: Literal[False] = False) -> Tuple[list[int], State]: ...
    @overload
    def generate(self, prompt: Union[str, Sequence[int]], *, max_tokens: int = 256, temperature: float = 0.8,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, repetition_penalty: float = 1.0,
                 repeat_last_n: int = 64, stop: Optional[Sequence[str]] = None,
                 stop_ids: Optional[Sequence[int]] = None, ignore_eos: bool = False,
                 seed: Optional[int] = None, state: Optional[State] = None,
                 stream: Literal[True]) -> Tuple[Stream, State]: ...
    def score(self, text: str, seq_len: int = 256, batch: int = 8, max_tokens: int = 1048576) -> dict[str, float]: ...
    def save(self, path: str) -> None: ...

class Trainer:
    def __init__(self, model: Model, data: Union[str, Sequence[int]], *, lr: float = 1e-3, steps: int = 1000,
                 wsla: bool = False, batch: int = 8, seq_len: int = 256, warmup: int = 100,
                 weight_decay: float = 0.1, clip: float = 1.0, seed: int = 0, dropout: float = 0.0) -> None:
        """dropout: residual dropout, as `ssm train --dropout`. bfloat16/float16 projections are
        widened to float32 master weights in place; int8 ones are refused."""
    def step(self) -> float:
        """One optimizer step; returns its mean training loss."""
    @property
    def steps_done(self) -> int: ...
    @property
    def finished(self) -> bool: ...
    def save_checkpoint(self, dir: str) -> None: ...
