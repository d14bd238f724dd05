"""The HTML report: its plots and tables hold the numbers of the JSON report, and it fetches nothing."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.support import SAMPLES, run_ok, with_changed_weight


class Page(HTMLParser):
    """Every element of a page, with its attributes and the ids of the article and svg it sits in."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.elements: list[dict] = []
        self.stack: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        article = next((a.get("id") for t, a in reversed(self.stack) if t == "article"), None)
        svg = next((a for t, a in reversed(self.stack) if t == "svg"), None)
        self.elements.append({"tag": tag, "attrs": attrs, "article": article, "svg": svg})
        if tag not in ("meta", "br", "img", "link", "hr", "input"):  # HTML's void elements have no end tag
            self.stack.append((tag, attrs))

    def handle_endtag(self, tag):
        if any(t == tag for t, _ in self.stack):
            while self.stack.pop()[0] != tag:
                pass

    def handle_data(self, data):
        self.text.append(data)

    def find(self, tag: str, article: str | None = None, **attrs) -> list[dict]:
        found = []
        for e in self.elements:
            if e["tag"] != tag or (article is not None and e["article"] != article):
                continue
            if all(e["attrs"].get(k.replace("_", "-")) == v for k, v in attrs.items()):
                found.append(e)
        return found

    def in_plot(self, tag: str, article: str, plot: str, css: str | None = None) -> list[dict]:
        return [
            e
            for e in self.elements
            if e["tag"] == tag
            and e["article"] == article
            and e["svg"] is not None
            and e["svg"].get("data-plot") == plot
            and (css is None or e["attrs"].get("class") == css)
        ]


def _report(folder: Path, name: str, *args) -> tuple[int, dict, str]:
    """Run mgerun with --report-json and --report-html; return its exit code, the JSON report and the page."""
    from mgedump.cli import mgerun_main

    json_path, html_path = folder / f"{name}.json", folder / f"{name}.html"
    with pytest.raises(SystemExit) as exit_info:
        mgerun_main([str(a) for a in (*args, "--report-json", json_path, "--report-html", html_path, "-q")])
    return exit_info.value.code, json.loads(json_path.read_text()), html_path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """Two runs, in one report each: a swept, profiled model with a free batch (two bundles of it), and a
    failing bundle that carries an io dump."""
    folder = tmp_path_factory.mktemp("html")
    run_ok("mgedump", SAMPLES / "dynamic_batch.onnx", "-d", "x:#rand(0,1,2,...)", "-d", "x:#rand(0,2,1,...)",
           "-o", folder / "sweep.mgetest", "-q")  # fmt: skip
    run_ok("mgedump", SAMPLES / "dynamic_batch.onnx", "-d", "x:#rand(0,1,1,...)", "-o", folder / "one.mgetest", "-q")
    run_ok("mgedump", SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "--embed-io-dump", "-o", folder / "good.mgetest", "-q")
    with_changed_weight(folder / "good.mgetest", folder / "broken.mgetest")
    code, swept, swept_page = _report(
        folder, "sweep", folder / "sweep.mgetest", folder / "one.mgetest", "--iter", "7", "--warmup-iter", "2",
        "--repeat-sweep", "1,2,4", "--profile", folder / "p.json",
    )  # fmt: skip
    assert code == 0
    code, broken, broken_page = _report(folder, "broken", folder / "broken.mgetest", "--iter", "7", "--warmup-iter",
                                        "2", "--profile", folder / "q.json")  # fmt: skip
    assert code == 1
    return {"sweep": (swept, swept_page), "broken": (broken, broken_page)}


@pytest.mark.parametrize("run", ["sweep", "broken"])
def test_the_page_fetches_nothing_and_has_no_script(reported, run):
    _, text = reported[run]
    page = Page(text)
    assert not page.find("script") and not page.find("link") and not page.find("img")
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in text


def test_verdicts_per_bundle_test_case_and_output(reported):
    document, text = reported["broken"]
    page = Page(text)
    assert page.find("span", data_verdict="FAILED")  # the page's own verdict
    rows = page.find("tr")
    assert [r["attrs"].get("data-bundle") for r in rows if r["attrs"].get("data-bundle")] == ["0"]
    broken = document["bundles"][0]
    assert broken["exit_code"] == 1
    outputs = page.find("span", data_output="prob")
    assert [o["attrs"]["class"] for o in outputs] == ["fail"]
    assert "first divergence (against the bundle's embedded io dump):" in "".join(page.text)
    assert broken["test_cases"][0]["diagnosis"]["text"] in "".join(page.text)
    assert broken["test_cases"][0]["outputs"][0]["failure"][0] in "".join(page.text)
    assert not page.find("details")  # every test case failed: none is folded


def test_a_failing_case_has_its_histogram_and_every_run_marked(reported):
    document, text = reported["broken"]
    page = Page(text)
    for b, bundle in enumerate(document["bundles"]):
        for case in bundle["test_cases"]:
            article = f"bundle-{b}-case-{case['index']}"
            (hist,) = [e["svg"] for e in page.in_plot("rect", article, "histogram")][:1]
            assert int(hist["data-count"]) == case["latency_ms"]["count"] == 7
            bars = page.in_plot("rect", article, "histogram", "bar timed")
            assert sum(int(b["attrs"]["data-count"]) for b in bars) == 7
            assert float(bars[0]["attrs"]["data-from"]) == pytest.approx(case["latency_ms"]["min"], rel=1e-5)
            assert float(bars[-1]["attrs"]["data-to"]) == pytest.approx(case["latency_ms"]["max"], rel=1e-5)
            median = page.in_plot("line", article, "histogram", "marker")[0]["attrs"]
            assert float(median["data-ms"]) == pytest.approx(case["latency_ms"]["median"], rel=1e-5)
            timed = page.in_plot("circle", article, "timeline", "timed")
            warm = page.in_plot("circle", article, "timeline", "warmup")
            assert [float(c["attrs"]["data-ms"]) for c in timed] == pytest.approx(case["latencies_ms"], rel=1e-5)
            assert [float(c["attrs"]["data-ms"]) for c in warm] == pytest.approx(case["warmup_ms"], rel=1e-5)
            assert [int(c["attrs"]["data-run"]) for c in warm + timed] == list(range(1, 10))


def test_a_passing_case_is_folded_with_every_run_on_one_line(reported):
    document, text = reported["sweep"]
    page = Page(text)
    for b, bundle in enumerate(document["bundles"]):
        for case in bundle["test_cases"]:
            article = f"bundle-{b}-case-{case['index']}"
            assert [e["attrs"]["class"] for e in page.find("details", article=article)] == ["case"]
            assert not page.in_plot("rect", article, "histogram")
            assert not page.in_plot("circle", article, "timeline", "timed")
            (line,) = page.in_plot("polyline", article, "timeline", "line runs")
            runs = [float(ms) for ms in line["attrs"]["data-ms"].split()]
            assert runs == pytest.approx(case["latencies_ms"], rel=1e-5)
            assert int(line["attrs"]["data-first-run"]) == len(case["warmup_ms"]) + 1
            warm = page.in_plot("circle", article, "timeline", "warmup")
            assert [float(c["attrs"]["data-ms"]) for c in warm] == pytest.approx(case["warmup_ms"], rel=1e-5)


def test_the_sweep_curve_holds_each_batch(reported):
    document, text = reported["sweep"]
    page = Page(text)
    bundle = document["bundles"][0]
    for case in bundle["test_cases"]:
        article = f"bundle-0-case-{case['index']}"
        points = page.in_plot("circle", article, "sweep", "rate timed")
        assert [int(p["attrs"]["data-batch"]) for p in points] == [t["batch"] for t in case["sweep"]]
        for point, timing in zip(points, case["sweep"], strict=True):
            samples = timing["inferences_per_s"] * timing["batch"]
            assert float(point["attrs"]["data-samples-per-s"]) == pytest.approx(samples, rel=1e-5)
            # one statistic for both curves: ms per sample is 1000 / samples per second, at every batch
            assert float(point["attrs"]["data-ms-per-sample"]) == pytest.approx(1e3 / samples, rel=1e-5)
    assert [t["batch"] for t in bundle["test_cases"][0]["sweep"]] == [2, 4, 8]  # test case 0 has batch 2


def test_the_sweep_at_batch_1_agrees_with_itself():
    from mgedump.report.html import sweep_points
    from mgedump.report.schema import Latency, TimingRecord

    # a skewed run: the mean (what inf/s comes from) is far from the median
    runs = [1.0, 1.0, 1.0, 1.0, 9.0]
    one = TimingRecord(1, 1, Latency.of(runs), runs, inferences_per_s=1e3 / (sum(runs) / len(runs)))
    (point,) = sweep_points([one])
    assert point["samples_per_s"] * point["ms_per_sample"] == pytest.approx(1e3)
    assert point["ms_per_sample"] == pytest.approx(2.6)  # the mean, as inf/s says: not the median's 1.0


@pytest.mark.parametrize("run", ["sweep", "broken"])
def test_the_operator_bars_are_the_profiles_top_ten(reported, run):
    document, text = reported[run]
    page = Page(text)
    bars = [e for e in page.elements if e["tag"] == "rect" and e["svg"] and e["svg"].get("data-plot") == "op-profile"]
    expected = [row for bundle in document["bundles"] for row in (bundle["op_profile"] or [])[:10]]
    assert len(bars) == len(expected) > 0
    assert [b["attrs"]["data-op-type"] for b in bars] == [row["op_type"] for row in expected]
    assert [float(b["attrs"]["data-share"]) for b in bars] == pytest.approx([r["share"] for r in expected], rel=1e-5)
    assert "Conv" in {row["op_type"] for row in expected}
    assert sum(r["share"] for r in document["bundles"][0]["op_profile"]) == pytest.approx(1.0)


def test_a_bundle_that_could_not_run_is_on_the_page(tmp_path, mgerun):
    bad = tmp_path / "bad.mgetest"
    bad.write_text("junk")
    good = tmp_path / "good.mgetest"
    run_ok("mgedump", SAMPLES / "gray.onnx", "-d", "#rand(0,1)", "-o", good, "-q")
    assert mgerun(good, bad, "--iter", "1", "--report-html", tmp_path / "r.html").code == 2
    page = Page((tmp_path / "r.html").read_text())
    assert [e["attrs"]["data-verdict"] for e in page.find("span") if e["attrs"].get("data-verdict")][:3] == [
        "ERROR",  # the page
        "ERROR",  # the summary table's rows: the failing bundle first
        "PASSED",
    ]
    assert [e["attrs"]["id"] for e in page.find("section")] == ["bundle-1", "bundle-0"]
    assert "not a bundle" in "".join(page.text)


def test_the_report_renders_again_from_a_saved_json_report(reported, tmp_path):
    from mgedump.report.html import render_html
    from mgedump.report.schema import RunReport

    document, text = reported["sweep"]
    assert render_html(document) == text  # the page is a function of the report alone
    assert render_html(RunReport.from_json(document)) == text


def test_a_long_run_draws_bands_not_dots():
    from mgedump.report import svg

    drawn = svg.timeline([1.0 + (k % 7) * 0.01 for k in range(10_000)], [5.0])
    assert 'class="timed"' not in drawn and 'class="band timed"' in drawn and drawn.count("<circle") == 1
    assert len(drawn) < 200_000


@pytest.mark.parametrize(
    "low, high, expected",
    [
        (0, 1, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (0.093, 0.138, [0.09, 0.1, 0.11, 0.12, 0.13, 0.14]),
        (3, 3, [3, 4, 5, 6]),
        (0, 1234, [0, 500, 1000, 1500]),
    ],
)
def test_nice_ticks(low, high, expected):
    from mgedump.report.svg import nice_ticks

    assert nice_ticks(low, high, 5) == pytest.approx(expected)


def test_text_from_the_report_is_escaped():
    from mgedump.report.html import render_html
    from mgedump.report.schema import BundleRecord, RunReport

    source = "<script>alert(1)</script>\x1b[31m\u202e\udcff.mgetest"
    report = RunReport([BundleRecord(source, "n<i>", "bundle", 2, error="<b>bad</b>\x00")], exit_code=2)
    text = render_html(report)
    text.encode("utf-8")
    assert "<script>" not in text and "&lt;script&gt;" in text and "&lt;b&gt;bad&lt;/b&gt;\\x00" in text
    assert "\\x1b[31m\\u202e\\xff.mgetest" in text and "n&lt;i&gt;" in text


def test_the_sweep_report_covers_both_bundles(reported):
    document, text = reported["sweep"]
    assert [Path(b["source"]).name for b in document["bundles"]] == ["sweep.mgetest", "one.mgetest"]
    assert [e["attrs"]["id"] for e in Page(text).find("section")] == ["bundle-0", "bundle-1"]


# ---------------------------------------------------------------- labels that do not collide


def _boxes(svg_text: str) -> list[tuple[float, float, float, float, str]]:
    """Each label's box (left, right, top, bottom) as drawn: the width estimated at svg.CHAR a character."""
    import re

    from mgedump.report import svg

    boxes = []
    for match in re.finditer(r"<text ([^>]*)>([^<]*)</text>", svg_text):
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', match.group(1)))
        if "transform" in attrs or "tspan" in match.group(2):
            continue
        x, y, width = float(attrs["x"]), float(attrs["y"]), len(match.group(2)) * svg.CHAR
        anchor = attrs.get("text-anchor", "start")
        left = x - width / 2 if anchor == "middle" else x - width if anchor == "end" else x
        boxes.append((left, left + width, y - 8, y + 1, match.group(2)))
    return boxes


@pytest.mark.parametrize(
    "drawn",
    [
        "histogram-close",  # median and p99 a hair apart
        "histogram-apart",
        "timeline-clipped",  # a cold first run ten times the others: its value written, clipped
        "timeline-many",
        "sweep",
    ],
)
def test_labels_stay_inside_and_apart(drawn):
    from mgedump.report import svg

    runs = [1.0] * 98 + [1.01, 1.02]
    made = {
        "histogram-close": lambda: svg.histogram(runs),
        "histogram-apart": lambda: svg.histogram([1.0, 1.1, 1.2, 5.0]),
        "timeline-clipped": lambda: svg.timeline([1.0, 1.1, 0.9] * 5, [30.0, 2.0]),
        "timeline-many": lambda: svg.timeline([1.0 + k / 1000 for k in range(997)], [1.5, 1.2, 1.1]),
        "sweep": lambda: svg.sweep(
            [{"batch": b, "samples_per_s": 1000.0 * b, "ms_per_sample": 1.0 / b} for b in (1, 2, 4, 8, 16, 32)]
        ),
    }[drawn]()
    boxes = _boxes(made)
    assert boxes
    for left, right, _, _, label in boxes:
        assert left >= 0 and right <= svg.WIDTH, f"{label!r} is cut at the edge ({left:.0f} to {right:.0f})"
    for k, a in enumerate(boxes):
        for b in boxes[k + 1 :]:
            overlap = a[0] < b[1] - 0.5 and b[0] < a[1] - 0.5 and a[2] < b[3] and b[2] < a[3]
            assert not overlap, f"{a[4]!r} and {b[4]!r} overlap"
    plot_top = svg.TOP
    for _, _, _, bottom, label in boxes:
        if label in ("median", "p99", "timed runs →") or "↑" in label:
            assert bottom <= plot_top, f"{label!r} is drawn over the plot, not above it"


# ---------------------------------------------------------------- a bundle of many test cases


def test_two_hundred_passing_test_cases_make_a_short_page(tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("x:#rand(0,1,1,...)\n" * 200, encoding="utf-8")
    run_ok("mgedump", SAMPLES / "dynamic_batch.onnx", "-d", f"@{cases}", "-o", tmp_path / "many.mgetest", "-q")
    code, document, text = _report(tmp_path, "many", tmp_path / "many.mgetest")
    assert code == 0 and len(document["bundles"][0]["test_cases"]) == 200
    size = len(text.encode("utf-8"))
    assert size < 1 << 20, f"{size / (1 << 20):.2f} MB"
    page = Page(text)
    assert len(page.find("details", **{"class": "case"})) == 200
    assert len(page.find("details", **{"class": "all"})) == 2  # the table, and the passing test cases, folded
    assert not page.find("article", **{"class": "case failed"})
    (overview,) = [e for e in page.elements if e["tag"] == "svg" and e["attrs"].get("data-plot") == "cases"]
    assert int(overview["attrs"]["data-points"]) == 200
