"""Benchmarks of mgedump: measured against baselines taken in the same invocation.

Every figure is a median over several runs, and every target is a ratio (or a
difference) against a baseline measured in the same invocation, with the runs
of the things compared alternated (A, B, C, then B, C, A, ...), so a shared or
noisy machine skews both sides alike. Lone absolute times are given for context
only.

Sections (``--sections``, a comma list; default: all, in the order of
:data:`runner.ORDER`), one file each in this folder, each file's docstring
saying what it measures and its targets: ``overhead``, ``pack``, ``rss``,
``startup``, ``load``, ``report``, ``optimize``, ``trace``, ``zip``,
``iodump``, ``float16``, ``int8``, ``needs``, ``fitting``, ``native``, ``big``, ``gates``. What more than one section shares is in
:mod:`.common` (results, processes, formatting) and :mod:`.models` (the models
measured); the document is :mod:`.document`; the command line is
:mod:`.runner`, started as ``python scripts/bench.py`` or
``python -m scripts.bench``.

Measuring child processes: each is spawned with ``subprocess.Popen`` and reaped
with ``os.wait4(pid, 0)``, which gives that child's own ``ru_maxrss`` (KiB on
Linux); wall time is ``time.perf_counter`` around spawn..reap. On Linux a child
spawned by vfork (what ``Popen`` uses) starts its ``ru_maxrss`` at the parent's
peak RSS, so this process imports nothing heavy: in-process measurements and
the model generator run in worker processes (``--worker``, internal), and the
report states the floor this leaves.

Running (from the repository root, in the project's venv)::

    python scripts/bench.py                          # everything; writes docs/benchmarks.md (minutes)
    python scripts/bench.py --runs 7                 # more runs per measurement
    python scripts/bench.py --sections pack,rss      # some sections only
    python scripts/bench.py --sections big:many      # a part of a section (its module's PARTS)
    python scripts/bench.py --quick --out /tmp/b.md  # smoke test: tiny sizes, few runs
    pip install -e ".[bench]"                        # polygraphy, for command B of `pack`

The Markdown goes to ``--out`` (written atomically) and to stdout; progress
goes to stderr. ``--keep-tmp`` keeps the temporary folder (models, bundles).

Adding a section: write ``scripts/bench/NAME.py`` with ``def section(ctx: Context) -> Table``
(and, for what it measures inside a Python process, ``WORKERS = {"name": function}``; for parts that run
alone, ``PARTS`` and :meth:`~.common.Context.wants`), and add NAME to
:data:`runner.ORDER`. Use :func:`~.common.run_process` for commands, :func:`~.common.run_worker` for anything
measured inside a Python process, and :func:`~.common.alternate` to interleave the things compared.
"""
