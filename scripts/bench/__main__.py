"""``python -m scripts.bench``: the same as ``python scripts/bench.py``."""

import sys

from .runner import main

sys.exit(main())
