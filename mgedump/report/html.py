"""The HTML report: one self-contained page (inline CSS and SVG, no script, nothing fetched) from the report's
records.

The page opens with the verdict, where it ran, and a table of every bundle,
failing bundles first. Then, per bundle (failing first): its session and cold
start, what differs from where it was packed, the latency of each test case at
a glance (from 10 test cases), a table of its test cases (verdict, every
output's err against its maxerr, latency figures), and per test case:

- a failing one, open: its failure lines, the first divergence when the bundle
  carried an io dump, beside them what differs from the packing machine, a
  latency histogram, a per-run timeline with the warm-up runs apart, and the
  batch-sweep curves;
- a passing one, folded (``<details>``): its latency line, the timeline drawn
  as one line, and the batch-sweep curves;

and with ``--profile``, the share of time of the ten most expensive operator
types. From 10 test cases, the table and the passing test cases are folded as
a whole too: a bundle of 200 passing test cases is a page of a few lines,
about 0.6 MB.
Every text from outside goes through :func:`mgedump.base.text.html`.
"""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..base.text import html as esc
from ..model.environment import summary as environment_summary
from ..model.session import SessionSettings
from . import svg
from .schema import BundleRecord, CaseRecord, RunReport, TimingRecord, as_report
from .spread import spread_lines

STYLE = f"""
body {{ font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 24px auto;
       max-width: 1020px; padding: 0 16px; }}
h1 {{ font-size: 22px; margin: 0 0 4px; }} h2 {{ font-size: 18px; margin: 32px 0 6px; border-top: 1px solid #ddd;
padding-top: 16px; }} h3 {{ font-size: 15px; margin: 18px 0 6px; }} h4 {{ font-size: 14px; margin: 14px 0 4px; }}
table {{ border-collapse: collapse; margin: 6px 0 10px; font-variant-numeric: tabular-nums; }}
th, td {{ padding: 3px 10px 3px 0; text-align: right; border-bottom: 1px solid #eee; vertical-align: top; }}
th:first-child, td:first-child, td.text, th.text {{ text-align: left; }}
td.text {{ overflow-wrap: anywhere; }}
th {{ font-weight: 600; color: #555; }}
.pass {{ color: #1e7b34; font-weight: 600; }} .fail {{ color: #b3261e; font-weight: 600; }}
.error {{ color: #8a4b00; font-weight: 600; }} .skip {{ color: #666; font-weight: 600; }}
pre {{ background: #f6f7f9; padding: 8px; font-size: 12px; margin: 4px 0; white-space: pre-wrap;
      overflow-wrap: anywhere; }}
.meta {{ color: #666; font-size: 13px; margin: 2px 0; overflow-wrap: anywhere; }}
.elsewhere {{ color: #8a4b00; font-size: 13px; margin: 4px 0; }}
details.case {{ margin: 2px 0; }} details > summary {{ cursor: pointer; font-size: 13px; }}
details.all {{ margin: 8px 0; }} details.all > summary {{ font-size: 14px; font-weight: 600; color: #444; }}
details.case[open] {{ margin-bottom: 12px; }}
.plots {{ display: flex; flex-wrap: wrap; gap: 12px; }}
.plots svg {{ width: 460px; max-width: 100%; height: auto; background: #fff; }}
{svg.STYLE}"""

VERDICTS = {0: ("PASSED", "pass"), 1: ("FAILED", "fail"), 2: ("ERROR", "error")}
MANY = 10  # from this many test cases, a bundle's table and its passing test cases are folded as a whole too


def _verdict(code: int, checked: bool = True) -> str:
    text, css = VERDICTS.get(code, (f"exit {code}", "error"))
    if code == 0 and not checked:
        text, css = "RAN", "skip"
    return f'<span class="{css}" data-verdict="{text}">{text}</span>'


def _bundle_verdict(bundle: BundleRecord) -> str:
    if bundle.not_run is not None:
        return '<span class="skip" data-verdict="NOT RUN">NOT RUN</span>'
    return _verdict(bundle.exit_code, bundle.checked or bundle.error is not None)


def _ms(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _case_code(case: CaseRecord) -> int:
    return 0 if case.passed else 1


def _failing_first(bundles: list[tuple[int, BundleRecord]]) -> list[tuple[int, BundleRecord]]:
    return sorted(bundles, key=lambda kb: (kb[1].exit_code == 0, kb[0]))


def _summary_table(bundles: list[tuple[int, BundleRecord]]) -> list[str]:
    out = [
        '<table id="bundles"><tr><th>bundle</th><th class="text">verdict</th><th>test cases</th><th>failed</th>'
        "<th>median ms (of the test cases' medians)</th><th>session ms</th><th>first run ms</th></tr>"
    ]
    for k, bundle in bundles:
        cases = bundle.test_cases
        medians = sorted(c.timing.latency.median for c in cases if c.timing.latency.median is not None)
        out.append(
            f'<tr data-bundle="{k}"><td class="text"><a href="#bundle-{k}">{esc(bundle.name)}</a></td>'
            f'<td class="text">{_bundle_verdict(bundle)}</td>'
            f"<td>{len(cases)}</td><td>{len(bundle.failed_cases())}</td>"
            f"<td>{_ms(medians[len(medians) // 2] if medians else None)}</td>"
            f"<td>{_ms(bundle.cold_start.session_create_ms, 1)}</td><td>{_ms(bundle.cold_start.first_run_ms)}</td></tr>"
        )
    out.append("</table>")
    return out


def _case_table(k: int, bundle: BundleRecord) -> list[str]:
    out = [
        '<table class="cases"><tr><th>test case</th><th class="text">spec</th><th class="text">verdict</th>'
        '<th class="text">outputs (err / maxerr)</th><th>runs</th><th>median ms</th><th>p90</th><th>p99</th>'
        "<th>inf/s</th><th>samples/s</th></tr>"
    ]
    for case in bundle.test_cases:
        stats = case.timing.latency
        cells = ", ".join(
            f'<span class="{"pass" if o.passed else "fail"}" data-output="{esc(o.name)}">{esc(o.cell())}</span>'
            for o in case.outputs
        )
        cells = cells or ("model failed to run" if case.error else "not checked")
        out.append(
            f'<tr data-case="{case.index}"><td><a href="#{_case_id(k, case)}">{case.index}</a></td>'
            f'<td class="text">{esc(case.spec)}</td><td class="text">'
            f'{_verdict(_case_code(case), bundle.checked or case.error is not None)}</td><td class="text">{cells}</td>'
            f"<td>{stats.count}</td><td>{_ms(stats.median)}</td><td>{_ms(stats.p90)}</td><td>{_ms(stats.p99)}</td>"
            f"<td>{_rate(case.timing.inferences_per_s)}</td><td>{_rate(case.timing.samples_per_s)}</td></tr>"
        )
    out.append("</table>")
    return out


def _case_id(k: int, case: CaseRecord) -> str:
    return f"bundle-{k}-case-{case.index}"


def sweep_points(sweep: list[TimingRecord]) -> list[dict[str, Any]]:
    """The batch sweep's points: samples/s and its reciprocal, ms/sample, per batch size."""
    return [
        {"batch": t.batch, "samples_per_s": t.sample_rate, "ms_per_sample": t.ms_per_sample}
        for t in sweep
        if t.sample_rate
    ]


def _plots(case: CaseRecord, full: bool) -> list[str]:
    timing = case.timing
    plots = [
        svg.histogram(timing.latencies_ms) if full else "",
        svg.timeline(timing.latencies_ms, timing.warmup_ms, marks=full),
        svg.sweep(sweep_points(case.sweep)),
    ]
    plots = [p for p in plots if p]
    return ['<div class="plots">' + "".join(plots) + "</div>"] if plots else []


def _case_body(case: CaseRecord, bundle: BundleRecord) -> list[str]:
    out = []
    if case.error:
        out.append(f"<pre>{esc(case.error, lines=True)}</pre>")
    failures = case.failure_lines()
    if failures:
        out.append(f"<pre>{esc(chr(10).join(failures), lines=True)}</pre>")
    if case.diagnosis is not None:
        out.append(f'<p class="diagnosis"><b>{esc(case.diagnosis.line())}</b></p>')
    if not case.passed and bundle.environment_differences:
        out.append(
            '<p class="elsewhere">Where it ran differs from where it was packed: '
            + esc("; ".join(bundle.environment_differences))
            + "</p>"
        )
    line = case.timing.line()
    if line:
        out.append(f'<p class="meta">{esc(line)}</p>')
    return out


def _case_section(k: int, bundle: BundleRecord, case: CaseRecord) -> list[str]:
    head = f"{esc(case.head)} {_verdict(_case_code(case), bundle.checked or case.error is not None)}"
    if not case.passed:
        out = [f'<article class="case failed" id="{_case_id(k, case)}"><h4>{head}</h4>']
        out += _case_body(case, bundle) + _plots(case, full=True)
        out.append("</article>")
        return out
    median = case.timing.latency.median
    note = f' <span class="meta">median {median:.3f} ms</span>' if median is not None else ""
    out = [
        f'<article class="case passed" id="{_case_id(k, case)}"><details class="case"><summary>{head}{note}</summary>'
    ]
    out += _case_body(case, bundle) + _plots(case, full=False)
    out.append("</details></article>")
    return out


def _bundle_section(k: int, bundle: BundleRecord) -> list[str]:
    out = [f'<section class="bundle" id="bundle-{k}" data-source="{esc(bundle.source)}">']
    out.append(f"<h2>{esc(bundle.name)} {_bundle_verdict(bundle)}</h2>")
    out.append(f'<p class="meta">{esc(bundle.source)}</p>')
    if bundle.error is not None or bundle.not_run is not None:
        out.append(f"<pre>{esc(bundle.error or bundle.not_run, lines=True)}</pre></section>")
        return out
    if bundle.environment_differences:
        lead = "Where it ran differs from where it was packed: " if bundle.packed_environment else ""
        out.append(f'<p class="elsewhere">{esc(lead + "; ".join(bundle.environment_differences))}</p>')
    if bundle.packed_environment:
        out.append(f'<p class="meta packed">Packed with {esc(environment_summary(bundle.packed_environment))}</p>')
    if bundle.session is not None:
        out.append(f'<p class="meta">{esc(bundle.session.text(bundle.maxerr_text()))}</p>')
    cold = bundle.cold_start
    out.append(
        f'<p class="meta cold-start">Cold start: session created in {_ms(cold.session_create_ms, 1)} ms, '
        f"first run {_ms(cold.first_run_ms)} ms</p>"
    )
    overview = svg.cases(
        [
            {
                "index": c.index,
                "median": c.timing.latency.median,
                "min": c.timing.latency.min,
                "p99": c.timing.latency.p99,
                "passed": c.passed,
            }
            for c in bundle.test_cases
        ]
        if len(bundle.test_cases) >= MANY
        else []
    )
    if overview:
        out.append(f'<div class="plots">{overview}</div>')
    many = len(bundle.test_cases) >= MANY
    table = _case_table(k, bundle)
    if many:
        table = [f'<details class="all"><summary>every test case: a table of {len(bundle.test_cases)}</summary>']
        table += _case_table(k, bundle) + ["</details>"]
    out += table
    failing = [c for c in bundle.test_cases if not c.passed]
    passing = [c for c in bundle.test_cases if c.passed]
    for case in failing:
        out += _case_section(k, bundle, case)
    if passing and many:
        out.append(f'<details class="all"><summary>{len(passing)} passing test case(s)</summary>')
    for case in passing:
        out += _case_section(k, bundle, case)
    if passing and many:
        out.append("</details>")
    if bundle.fitting is not None:
        out += _fitting_section(bundle)
    if bundle.op_profile:
        rows = [row.to_json() for row in bundle.op_profile]
        out.append("<h3>Where the time goes (profiled)</h3>")
        out.append(f'<div class="plots">{svg.op_bars(rows[:10])}</div>')
        cells = "".join(
            f'<tr><td class="text">{esc(r.op_type)}</td><td>{r.calls}</td><td>{r.total_ms:.3f}</td>'
            f"<td>{_ms(r.ms_per_run)}</td><td>{r.share:.1%}</td></tr>"
            for r in bundle.op_profile
        )
        out.append(
            '<table class="op-profile"><tr><th>op type</th><th>calls</th><th>total ms</th><th>ms/run</th>'
            f"<th>share</th></tr>{cells}</table>"
        )
    out.append("</section>")
    return out


def _fitting_section(bundle: BundleRecord) -> list[str]:
    """``--fitting``: each variant verified, the candidates plotted and ranked, the choice."""
    fitting = bundle.fitting
    assert fitting is not None
    out = [
        "<h3>Fitting: the variant to ship on this machine</h3>",
        f'<p class="meta fitting-choice">{esc(fitting.choice_line())}</p>',
    ]
    verified = "; ".join(f"{v['name']} {'passed' if v['passed'] else 'FAILED'}" for v in fitting.variants)
    out.append(f'<p class="meta">Variants verified: {esc(verified)}</p>')
    chosen = fitting.chosen or {}
    bars = [
        {
            "variant": row.variant,
            "settings": row.settings,
            "median_ms": row.median_ms,
            "p90_ms": row.p90_ms,
            "chosen": chosen.get("variant") == row.variant and SessionSettings.from_json(chosen) == row.session,
        }
        for row in fitting.rows[:20]
    ]
    out.append(f'<div class="plots">{svg.fitting_bars(bars)}</div>')
    head, *rows = fitting.table()
    cells = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    out.append('<table class="fitting"><tr>' + "".join(f"<th>{esc(h)}</th>" for h in head) + f"</tr>{cells}</table>")
    return out


def render_html(document: RunReport | dict[str, Any]) -> str:
    """The report page of a report: its records, or a JSON report (report version 2)."""
    report = as_report(document)
    code = report.exit_code
    bundles = list(enumerate(report.bundles))
    counts = [sum(1 for b in report.bundles if b.exit_code == c and b.not_run is None) for c in (0, 1)]
    left = sum(1 for b in report.bundles if b.not_run is not None)
    errors = len(bundles) - sum(counts) - left
    peak = report.peak_rss_mib
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>mgerun report: {VERDICTS.get(code, ('exit',))[0]}</title>",
        f"<style>{STYLE}</style></head><body>",
        f'<h1>mgerun report {_verdict(code)}</h1><p class="meta" data-exit-code="{code}">'
        f"{len(bundles)} bundle(s): {counts[0]} passed, {counts[1]} failed, {errors} could not run"
        + (f", {left} not run" if left else "")
        + f"; exit code {code}"
        + (f"; peak memory {peak:.0f} MiB" if peak else "")
        + f"; mgedump {esc(__version__)}</p>",
    ]
    env = report.environment
    if env:
        when = " ".join(str(env.get(key) or "") for key in ("host", "timestamp")).strip()
        out.append(
            f'<p class="meta environment">Ran with {esc(environment_summary(env))}'
            + (f" ({esc(when)})" if when else "")
            + "</p>"
        )
    out += [f'<p class="meta spread">{esc(line)}</p>' for line in spread_lines(report)]
    ordered = _failing_first(bundles)
    out += _summary_table(ordered)
    for k, bundle in ordered:
        out += _bundle_section(k, bundle)
    out.append("</body></html>\n")
    return "\n".join(out)
