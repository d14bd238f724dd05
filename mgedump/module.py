"""``mgedump.module``: the stable import path of :mod:`mgedump.tracing.module` (Module and the layers).

Usage::

    import mgedump.module as M
    net = M.Sequential(M.Conv2d(3, 8, 3, padding=1), M.ReLU()).eval()
"""

from mgedump.tracing.module import *  # noqa: F403
from mgedump.tracing.module import __all__  # noqa: F401
