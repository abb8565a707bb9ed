"""Keep pytest out of the benchmark suite: ``make bench`` runs it (run.py), not pytest.

The files here are not named test_*, so pytest would not collect them anyway;
this also stops ``pytest tests/bench/run.py`` from importing (and running) them.
Keep the ``__init__.py`` beside this file: without it pytest imports this file
as a top-level module ``conftest`` too, which shadows tests/conftest.py and
breaks every test that does ``from conftest import ...``.
"""

collect_ignore_glob = ["*.py"]
