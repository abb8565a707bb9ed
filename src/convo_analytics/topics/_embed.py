"""Sentence embeddings from the weights that ship inside the wordllama wheel.

Topic discovery runs offline on a CPU, so the embedding model must be on disk
already and small: wordllama's "l2_supercat" token embeddings (32,000 tokens x
256 dimensions, float16, 16 MB) come in its wheel with their tokenizer, and a
sentence vector is the mean of its tokens' vectors, so 100,000 messages embed
in seconds.

wordllama's own ``WordLlama.load()`` looks for the tokenizer in a folder it
does not ship and then tries to download it; here the inference object is
built directly from the two bundled files, so no code path can reach the
network. wordllama also calls ``logging.basicConfig(level=INFO)`` when it is
imported, which would configure the host application's root logger; the
import below is done with a throwaway handler in place, which makes that call
a no-op.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

WEIGHTS_FILE = ("weights", "l2_supercat_256.safetensors")
TOKENIZER_FILE = ("tokenizers", "l2_supercat_tokenizer_config.json")
#: Texts embedded per call into wordllama (its own batches pad to the longest text).
BATCH = 512
#: Characters of a text that are embedded: a pasted document says no more about the
#: topic than its start, and padding a batch to a huge text costs memory.
MAX_CHARS = 1000


def _package_dir() -> Path:
    """The wordllama package folder, found without importing it (see the module doc)."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the wordllama package is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _import_inference() -> Any:
    """``wordllama.inference.WordLlamaInference``, imported without touching logging.

    ``logging.basicConfig`` does nothing when the root logger has a handler, so a
    NullHandler is put there for the import (when there is none) and removed after.
    """
    root = logging.getLogger()
    guard = None if root.handlers else logging.NullHandler()
    if guard is not None:
        root.addHandler(guard)
    try:
        from wordllama.inference import WordLlamaInference
    finally:
        if guard is not None:
            root.removeHandler(guard)
    return WordLlamaInference


@functools.lru_cache(maxsize=1)
def load_model() -> Any:
    """The embedding model, built once per process from the wheel's own files."""
    from safetensors import safe_open
    from tokenizers import Tokenizer

    folder = _package_dir()
    with safe_open(str(folder.joinpath(*WEIGHTS_FILE)), framework="np") as weights:
        matrix = weights.get_tensor("embedding.weight")
    tokenizer = Tokenizer.from_file(str(folder.joinpath(*TOKENIZER_FILE)))
    return _import_inference()(matrix, tokenizer)


def embed(texts: list[str]) -> NDArray[np.float32]:
    """One unit-length row per text; a text with no known token gets a zero row."""
    model = load_model()
    dim = int(model.embedding.shape[1])
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for start in range(0, len(texts), BATCH):
        chunk = [t[:MAX_CHARS] for t in texts[start : start + BATCH]]
        vectors = np.asarray(model.embed(chunk, norm=False, batch_size=64), dtype=np.float32)
        out[start : start + len(chunk)] = vectors
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    out[~np.isfinite(out).all(axis=1)] = 0.0
    return out
