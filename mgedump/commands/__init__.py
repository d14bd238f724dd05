"""The commands' cores, one module each; the command line (:mod:`mgedump.cli`) calls only these.

- :mod:`.pack`: :func:`~.pack.pack`, a model and its test cases into a bundle (``mgedump``).
- :mod:`.verify`: :func:`~.verify.verify`, one bundle (or a plain model with data) checked and timed (``mgerun``).
- :mod:`.verify_many`: :func:`~.verify_many.plan_runs` and :func:`~.verify_many.verify_all`, many bundles and
  folders in one call, with the reports (``mgerun``).
- :mod:`.diff`: :func:`~.diff.diff`, two runs compared tensor by tensor (``mgediff``).

The package re-exports no function, so each name above is a module and stays one; the library's functions are
``mgedump.pack``, ``mgedump.verify``, ``mgedump.verify_all`` and ``mgedump.diff``. Everything below the
commands (data, bundle, runtime, diagnosis, optimisation, reports) is a library they share.
"""
