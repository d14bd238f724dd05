"""``mgedump.random``: the stable import path of :mod:`mgedump.tracing.random` (MegEngine's ``megengine.random``).

Usage::

    from mgedump.random import normal, uniform
    noise = normal(0.0, 1.0, size=(2, 3))
"""

from mgedump.tracing.random import *  # noqa: F403
from mgedump.tracing.random import __all__  # noqa: F401
