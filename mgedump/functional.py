"""``mgedump.functional``: the stable import path of :mod:`mgedump.tracing.functional` (tensor functions).

Usage::

    import mgedump.functional as F
    y = F.relu(F.conv2d(x, w, b, padding=1))
"""

from mgedump.tracing.functional import *  # noqa: F403
from mgedump.tracing.functional import __all__  # noqa: F401
