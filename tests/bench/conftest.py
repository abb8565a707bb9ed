"""Keep pytest out of the benchmark suite: it is run by ``make bench`` (run.py), not pytest.

The files here are not named test_*, so pytest would not collect them anyway;
this also stops a ``pytest tests/bench/run.py`` from importing (and running) them.
"""

collect_ignore_glob = ["*.py"]
