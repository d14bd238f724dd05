"""The benchmarks' command line, as it has always been started: ``python scripts/bench.py [--sections A,B]
[--runs N] [--quick] [--out FILE] [--keep-tmp]``. The benchmarks are the folder ``scripts/bench/`` beside this file
(its ``__init__.py`` says how they measure; one file a section); ``python -m scripts.bench`` is the same."""

import sys

from bench.runner import main  # the folder scripts/bench/: Python finds a package before a module of the same name

if __name__ == "__main__":
    sys.exit(main())
