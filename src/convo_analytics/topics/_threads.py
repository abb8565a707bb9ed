"""The BLAS and OpenMP threads topic discovery uses: one.

numpy's OpenBLAS and scikit-learn's OpenMP (k-means) each start a pool of one
thread per core, and their threads spin while they wait for work. Topic
discovery's matrices are small (a core of at most 2,500 texts, 256 dimensions),
so more threads win little on an idle machine, and on a busy one (a nightly run
beside other jobs, two test workers on two cores) the spinning pools fight for
the cores: one transform's discovery took 74 s instead of 9 s with one thread,
and a discovery of 3,000 texts 63 s instead of 45 s (two threads on a busy
2-core machine; a run pinned to two threads there took over ten minutes).
Discovery and placement therefore run with the pools limited to ``THREADS``
(decision D-TOPIC-THREADS); the topics do not depend on the thread count.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["THREADS", "limited_threads"]

#: The BLAS and OpenMP threads of topic discovery and placement.
THREADS = 1

_P = ParamSpec("_P")
_R = TypeVar("_R")


def limited_threads(*, openmp: bool) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Run the decorated function with the BLAS and OpenMP pools limited to ``THREADS``.

    threadpoolctl limits the libraries loaded when the limit is set: with ``openmp``
    (discovery, whose k-means runs on OpenMP) scikit-learn's k-means is imported first,
    which loads its OpenMP runtime; placement only multiplies matrices (BLAS) and does
    not pay for that import.
    """

    def decorate(func: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(func)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            if openmp:
                import sklearn.cluster  # noqa: F401  (loads the OpenMP runtime to limit)
            from threadpoolctl import threadpool_limits

            with threadpool_limits(limits=THREADS):
                return func(*args, **kwargs)

        return wrapper

    return decorate
