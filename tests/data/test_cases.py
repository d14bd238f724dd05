"""Building test cases: flags that apply to no data, where a spec came from in its errors."""

from __future__ import annotations

import pytest

from mgedump.base.errors import SpecError, UsageError
from mgedump.data.cases import build_cases
from mgedump.data.spec import CaseSpec
from mgedump.options import DataOptions
from tests.data.support import F32, build


def test_resize_and_transform_need_file_data():
    with pytest.raises(UsageError, match="resize_input"):
        build(["#rand(0,1)"], [F32], resize_input=True)
    with pytest.raises(UsageError, match="input_transform"):
        build(["#rand(0,1)"], [F32], input_transform="data")


def test_case_spec_origin_in_errors():
    with pytest.raises(SpecError, match=r"-d #2"):
        build_cases([CaseSpec("#rand(0,1)", "-d #1"), CaseSpec("#rand(1,0)", "-d #2")], [F32], DataOptions())
