"""``mgedump.jit``: the stable import path of :mod:`mgedump.tracing.jit` (``trace`` and ``exclude_from_trace``).

Usage::

    from mgedump.jit import trace, exclude_from_trace, TraceMismatchError
"""

from mgedump.tracing.jit import *  # noqa: F403
from mgedump.tracing.jit import __all__  # noqa: F401
