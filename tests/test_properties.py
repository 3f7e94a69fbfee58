"""Property-based tier over the example APIs: generated arguments, valid and hostile, for every tool
of every example overlay (tests/properties.py says what is generated and which properties hold).

The example upstreams validate every request they receive against their spec with openapi-core;
the third-party servers get the same tier behind tests/spec_proxy.py (tests/thirdparty/).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import compile_example
from tests.properties import PROFILE, Target, check, draw_call, served_in_memory

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")

SERVED = [("notes", "overlay.yaml"), ("petstore", "overlay.yaml"), ("petstore", "overlay-tasks.yaml"),
          ("market", "overlay.yaml"), ("mailfiles", "overlay.yaml")]


@pytest.fixture(scope="module", params=SERVED, ids=[f"{n}-{o.removesuffix('.yaml')}" for n, o in SERVED])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    from examples import Upstream

    name, overlay = request.param
    manifest = compile_example(name, overlay=overlay).manifest
    with Upstream.start(name) as up, served_in_memory(f"{name}/{overlay}", manifest,
                                                      {"OPENAPI2MCP_BASE_URL": up.base_url}, up.violations) as t:
        yield t


@PROFILE
@given(data=st.data())
def test_valid_arguments_are_served_or_refused_cleanly(target: Target, data: st.DataObject) -> None:
    check(target, *draw_call(data, target, broken=False))


@PROFILE
@given(data=st.data())
def test_broken_arguments_are_refused_with_a_named_field(target: Target, data: st.DataObject) -> None:
    check(target, *draw_call(data, target, broken=True))
