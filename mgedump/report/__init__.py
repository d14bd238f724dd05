"""Reports rendered from the JSON report (``mgerun --report-json``, report version 2): JUnit XML for CI servers
(:mod:`.junit`) and a self-contained HTML page for people (:mod:`.html`, plots in :mod:`.svg`).

Rendering from the one JSON document keeps the three reports in agreement, and
lets a report be rendered again later from a saved JSON file.
"""

from __future__ import annotations

import os

from ..bundle.format import BUNDLE_SUFFIX


def bundle_name(path: str) -> str:
    """What a bundle is called in reports and per-bundle output names: its file name without its suffix."""
    base = os.path.basename(str(path))
    return base.removesuffix(BUNDLE_SUFFIX) or base
