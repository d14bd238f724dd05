"""``python -m mgedump`` behaves like ``mgedump``."""

from mgedump.cli import mgedump_main

mgedump_main()
