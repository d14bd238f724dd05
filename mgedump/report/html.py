"""The HTML report: one self-contained page (inline CSS and SVG, no script, nothing fetched) from the JSON report.

The page opens with the verdict and a table of every bundle. Then, per bundle:
its session and cold start, a table of its test cases (verdict, every output's
err against maxerr, latency figures), and per test case its failure lines,
the first divergence when the bundle carried an io dump, a latency histogram,
a per-run timeline with the warm-up runs apart, and the batch-sweep curves;
with ``--profile``, the share of time of the ten most expensive operator types.
"""

from __future__ import annotations

from html import escape
from typing import Any

from .. import __version__
from . import bundle_name, svg

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 24px auto;
       max-width: 1020px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 32px 0 6px; border-top: 1px solid #ddd;
padding-top: 16px; } h3 { font-size: 15px; margin: 18px 0 6px; } h4 { font-size: 14px; margin: 14px 0 4px; }
table { border-collapse: collapse; margin: 6px 0 10px; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px 3px 0; text-align: right; border-bottom: 1px solid #eee; vertical-align: top; }
th:first-child, td:first-child, td.text, th.text { text-align: left; }
th { font-weight: 600; color: #555; }
.pass { color: #1e7b34; font-weight: 600; } .fail { color: #b3261e; font-weight: 600; }
.error { color: #8a4b00; font-weight: 600; }
pre { background: #f6f7f9; padding: 8px; overflow-x: auto; font-size: 12px; margin: 4px 0; }
.meta { color: #666; font-size: 13px; margin: 2px 0; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; }
.plots svg { width: 460px; max-width: 100%; height: auto; background: #fff; }
svg text { font: 10px system-ui, sans-serif; fill: #444; } svg text.title { font-size: 11px; font-weight: 600; }
svg text.label { font-size: 10px; fill: #666; }
svg .bar:hover, svg circle:hover { opacity: 0.7; }
"""

VERDICTS = {0: ("PASSED", "pass"), 1: ("FAILED", "fail"), 2: ("ERROR", "error")}


def _verdict(code: int) -> str:
    text, css = VERDICTS.get(code, (f"exit {code}", "error"))
    return f'<span class="{css}" data-verdict="{text}">{text}</span>'


def _ms(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _rate(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}"


def _case_verdict(case: dict[str, Any]) -> int:
    return 1 if case.get("error") or not case.get("passed") else 0


def _summary_table(document: dict[str, Any]) -> list[str]:
    out = [
        '<table id="bundles"><tr><th>bundle</th><th class="text">verdict</th><th>test cases</th><th>failed</th>'
        "<th>median ms (of the test cases' medians)</th><th>session ms</th><th>first run ms</th></tr>"
    ]
    for k, bundle in enumerate(document["bundles"]):
        cases = bundle.get("test_cases", [])
        failed = sum(1 for c in cases if not c.get("passed"))
        medians = sorted(c["latency_ms"]["median"] for c in cases if (c.get("latency_ms") or {}).get("count"))
        cold = bundle.get("cold_start") or {}
        out.append(
            f'<tr data-bundle="{k}"><td><a href="#bundle-{k}">{escape(bundle_name(bundle["source"]))}</a></td>'
            f'<td class="text">{_verdict(bundle["exit_code"])}</td><td>{len(cases)}</td><td>{failed}</td>'
            f"<td>{_ms(medians[len(medians) // 2] if medians else None)}</td>"
            f"<td>{_ms(cold.get('session_create_ms'), 1)}</td><td>{_ms(cold.get('first_run_ms'))}</td></tr>"
        )
    out.append("</table>")
    return out


def _case_table(bundle: dict[str, Any]) -> list[str]:
    out = [
        '<table class="cases"><tr><th>test case</th><th class="text">spec</th><th class="text">verdict</th>'
        '<th class="text">outputs (err / maxerr)</th><th>runs</th><th>median ms</th><th>p90</th><th>p99</th>'
        "<th>inf/s</th><th>samples/s</th></tr>"
    ]
    for case in bundle.get("test_cases", []):
        stats = case.get("latency_ms") or {}
        outputs = ", ".join(_output_cell(o) for o in case.get("outputs", []))
        outputs = outputs or ("model failed to run" if case.get("error") else "no assertion")
        out.append(
            f'<tr data-case="{case["index"]}"><td><a href="#{_case_id(bundle, case)}">{case["index"]}</a></td>'
            f'<td class="text">{escape(str(case.get("spec", "")))}</td><td class="text">'
            f'{_verdict(_case_verdict(case))}</td><td class="text">{outputs}</td><td>{stats.get("count", 0)}</td>'
            f"<td>{_ms(stats.get('median'))}</td><td>{_ms(stats.get('p90'))}</td><td>{_ms(stats.get('p99'))}</td>"
            f"<td>{_rate(case.get('inferences_per_s'))}</td><td>{_rate(case.get('samples_per_s'))}</td></tr>"
        )
    out.append("</table>")
    return out


def _output_cell(check: dict[str, Any]) -> str:
    err = "n/a" if check["err"] is None else f"{check['err']:.3g}"
    css = "pass" if check["passed"] else "fail"
    return f'<span class="{css}" data-output="{escape(check["name"])}">{escape(check["name"])} {err} / {check["maxerr"]:g}</span>'


def _case_id(bundle: dict[str, Any], case: dict[str, Any]) -> str:
    return f"{bundle['_id']}-case-{case['index']}"


def _sweep_points(case: dict[str, Any]) -> list[dict[str, Any]]:
    points = []
    for timing in case.get("sweep", []):
        stats = timing.get("latency_ms") or {}
        if not stats.get("count"):
            continue
        rate = timing.get("inferences_per_s") or 0.0
        points.append(
            {
                "batch": timing["batch"],
                "median_ms": stats["median"],
                "samples_per_s": rate * timing["batch"],
                "ms_per_sample": stats["median"] / timing["batch"],
            }
        )
    return points


def _case_section(bundle: dict[str, Any], case: dict[str, Any]) -> list[str]:
    head = f"test case {case['index']} ({escape(str(case.get('origin', '')))}: {escape(str(case.get('spec', '')))})"
    out = [f'<article class="case" id="{_case_id(bundle, case)}"><h4>{head} {_verdict(_case_verdict(case))}</h4>']
    if case.get("error"):
        out.append(f"<pre>the model failed to run: {escape(case['error'])}</pre>")
    failures = [line for o in case.get("outputs", []) for line in (o.get("failure") or [])]
    if failures:
        out.append(f"<pre>{escape(chr(10).join(failures))}</pre>")
    diagnosis = case.get("diagnosis")
    if diagnosis and diagnosis.get("text"):
        out.append(
            f'<p class="diagnosis">First divergence (against the bundle\'s embedded io dump): '
            f"<b>{escape(diagnosis['text'])}</b></p>"
        )
    stats = case.get("latency_ms") or {}
    if stats.get("count"):
        load = case.get("concurrency", 1)
        out.append(
            f'<p class="meta">{stats["count"]} timed run(s)'
            + (f", {load} at once" if load > 1 else "")
            + f"; median {stats['median']:.3f} ms, p99 {stats['p99']:.3f} ms, stddev {stats['stddev']:.3f} ms</p>"
        )
    plots = [
        svg.histogram(case.get("latencies_ms", [])),
        svg.timeline(case.get("latencies_ms", []), case.get("warmup_ms", [])),
        svg.sweep(_sweep_points(case)),
    ]
    plots = [p for p in plots if p]
    if plots:
        out.append('<div class="plots">' + "".join(plots) + "</div>")
    out.append("</article>")
    return out


def _bundle_section(bundle: dict[str, Any]) -> list[str]:
    out = [f'<section class="bundle" id="{bundle["_id"]}" data-source="{escape(str(bundle["source"]))}">']
    out.append(f"<h2>{escape(bundle_name(bundle['source']))} {_verdict(bundle['exit_code'])}</h2>")
    out.append(f'<p class="meta">{escape(str(bundle["source"]))}</p>')
    if bundle.get("error"):
        out.append(f"<pre>{escape(bundle['error'])}</pre></section>")
        return out
    session = bundle.get("session") or {}
    assertion = bundle.get("assertion") or {}
    out.append(
        '<p class="meta">'
        + escape(
            f"{', '.join(session.get('providers', []))}; threads {session.get('threads') or 'default'}; "
            f"{session.get('warmup')} warm-up and {session.get('iters')} timed run(s) per test case"
            + (f" (at least {session['duration_s']:g} s)" if session.get("duration_s") else "")
            + (f"; {session['concurrency']} at once" if session.get("concurrency", 1) > 1 else "")
            + (f"; maxerr {assertion['maxerr']:g}" if assertion.get("enabled") else "; no assertions")
        )
        + "</p>"
    )
    cold = bundle.get("cold_start") or {}
    out.append(
        f'<p class="meta cold-start">Cold start: session created in {_ms(cold.get("session_create_ms"), 1)} ms, '
        f"first run {_ms(cold.get('first_run_ms'))} ms</p>"
    )
    out += _case_table(bundle)
    for case in bundle.get("test_cases", []):
        out += _case_section(bundle, case)
    profile = bundle.get("op_profile")
    if profile:
        out.append("<h3>Where the time goes (--profile)</h3>")
        out.append(f'<div class="plots">{svg.op_bars(profile[:10])}</div>')
        rows = "".join(
            f"<tr><td>{escape(r['op_type'])}</td><td>{r['calls']}</td><td>{r['total_ms']:.3f}</td>"
            f"<td>{_ms(r['ms_per_run'])}</td><td>{r['share']:.1%}</td></tr>"
            for r in profile
        )
        out.append(
            '<table class="op-profile"><tr><th>op type</th><th>calls</th><th>total ms</th><th>ms/run</th>'
            f"<th>share</th></tr>{rows}</table>"
        )
    out.append("</section>")
    return out


def render_html(document: dict[str, Any]) -> str:
    """The report page of a JSON report (report version 2)."""
    bundles = [dict(b, _id=f"bundle-{k}") for k, b in enumerate(document["bundles"])]
    code = document["exit_code"]
    counts = [sum(1 for b in bundles if b["exit_code"] == c) for c in (0, 1)]
    errors = len(bundles) - sum(counts)
    peak = document.get("peak_rss_mib")
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>mgerun report: {VERDICTS.get(code, ('exit',))[0]}</title>",
        f"<style>{STYLE}</style></head><body>",
        f'<h1>mgerun report {_verdict(code)}</h1><p class="meta" data-exit-code="{code}">'
        f"{len(bundles)} bundle(s): {counts[0]} passed, {counts[1]} failed, {errors} could not run; exit code {code}"
        + (f"; peak memory {peak:.0f} MiB" if peak else "")
        + f"; mgedump {escape(__version__)}</p>",
    ]
    out += _summary_table(dict(document, bundles=bundles))
    for bundle in bundles:
        out += _bundle_section(bundle)
    out.append("</body></html>\n")
    return "\n".join(out)
