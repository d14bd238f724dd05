"""Session settings: one value for how a session runs, and the registry a new setting is added to in one place."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnxruntime
import pytest

from mgedump.base.errors import UsageError
from mgedump.base.naming import option_name
from mgedump.model.runtime import open_runner
from mgedump.model.session import SessionSettings, Setting, register, unregister
from tests.support import SAMPLES, one_report

SPINNING = "session.intra_op.allow_spinning"


def _zero_or_one(value: int, name: str) -> None:
    if value not in (0, 1):
        raise UsageError(f"{option_name(name)} must be 0 or 1, got {value}")


@pytest.fixture
def new_settings():
    """Two settings registered from here, as a plugin would: an onnxruntime session configuration entry and an
    option of the execution provider."""
    added = [
        register(
            Setting(
                "allow_spinning",
                "Whether idle intra-op threads spin (1) or sleep (0).",
                int,
                where="config",
                key=SPINNING,
                check=_zero_or_one,
            )
        ),
        register(Setting("device_id", "The device the provider runs on.", int, metavar="N", where="provider")),
    ]
    yield added
    for entry in added:
        unregister(entry.name)


@pytest.fixture
def providers_given(monkeypatch):
    """The providers (and their options) every onnxruntime session is made with: the real sessions, watched."""
    given = []
    real = onnxruntime.InferenceSession

    def watched(*args, **kwargs):
        given.append(kwargs.get("providers"))
        return real(*args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", watched)
    return given


def test_a_setting_registered_here_reaches_the_session(new_settings, providers_given):
    settings = SessionSettings.given(allow_spinning=0, device_id=3, threads=1)
    assert settings.session_config == ((SPINNING, "0"),) and settings.provider_options == (("device_id", "3"),)
    assert settings.value("allow_spinning") == "0" and settings.value("threads") == 1
    runner = open_runner(str(SAMPLES / "cnn.onnx"), settings)
    assert runner.session.get_session_options().get_session_config_entry(SPINNING) == "0"
    assert providers_given == [[("CPUExecutionProvider", {"device_id": "3"})]]
    (out,) = runner.run({"data": np.zeros((1, 3, 32, 32), np.float32)})
    assert out.shape == (1, 10) and [o.name for o in runner.outputs] == ["prob"]
    with pytest.raises(UsageError, match="allow_spinning must be 0 or 1, got 2"):
        SessionSettings.given(allow_spinning=2)


def test_a_setting_registered_here_is_a_flag_of_mgerun_and_in_the_report(
    new_settings, providers_given, tmp_path, mgedump, mgerun
):
    bundle, report = tmp_path / "cnn.mgetest", tmp_path / "r.json"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", bundle, "-q").code == 0
    help_text = mgerun("--help").out
    assert "--allow-spinning INTEGER" in help_text and "--device-id N" in help_text
    providers_given.clear()
    result = mgerun(bundle, "--iter", "1", "--allow-spinning", "0", "--device-id", "2", "--report-json", report)
    assert result.code == 0, result.err
    assert providers_given == [[("CPUExecutionProvider", {"device_id": "2"})]]
    session = one_report(report)["session"]
    assert session["session_config"] == {SPINNING: "0"} and session["provider_options"] == {"device_id": "2"}
    assert session["threads"] is None and session["graph_opt"] == "all"  # the others as they were
    html = tmp_path / "r.html"
    assert mgerun("--merge", report, "--report-html", html).code == 0  # read back, every field checked
    assert f"provider options device_id=2; session config {SPINNING}=0" in html.read_text(encoding="utf-8")
    bad = mgerun(bundle, "--allow-spinning", "2")
    assert bad.code == 2 and bad.err.strip() == "mgerun: error: --allow-spinning must be 0 or 1, got 2"


def test_a_report_without_them_keeps_its_shape(tmp_path, mgedump, mgerun):
    bundle, report = tmp_path / "cnn.mgetest", tmp_path / "r.json"
    assert mgedump(SAMPLES / "cnn.onnx", "-d", "#rand(0,1)", "-o", bundle, "-q").code == 0
    assert mgerun(bundle, "--iter", "1", "--thread", "1", "--report-json", report).code == 0
    session = one_report(report)["session"]
    assert sorted(session) == ["concurrency", "duration_s", "graph_opt", "iters", "providers", "threads", "warmup"]
    assert "--allow-spinning" not in mgerun("--help").out  # registered by the tests above only while they ran


def test_the_json_shapes():
    chosen = SessionSettings(provider="CPUExecutionProvider", threads=2, graph_opt="basic", execution_mode="parallel")
    as_written = {"provider": "CPUExecutionProvider", "threads": 2, "graph_opt": "basic", "execution_mode": "parallel"}
    assert chosen.to_json() == as_written and SessionSettings.from_json(as_written) == chosen
    assert chosen.text() == "CPU, 2 thread(s), basic, parallel"
    assert SessionSettings().report_json() == {"threads": None, "graph_opt": "all"}
    more = SessionSettings(provider_options={"b": 1, "a": "x"}, session_config=[("k", "v")])
    assert json.loads(json.dumps(more.report_json()))["provider_options"] == {"a": "x", "b": "1"}
    assert SessionSettings.from_json(more.report_json()) == dataclasses.replace(more, graph_opt="all")


def test_registry_refusals():
    with pytest.raises(ValueError, match="registered already"):
        register(Setting("threads", "again", int))
    with pytest.raises(ValueError, match="SessionSettings has no such field"):
        register(Setting("device", "not a field"))
    with pytest.raises(UsageError, match="no session setting 'nope'"):
        SessionSettings.given(nope=1)
