"""Digits that `str.isdigit()` accepts but `int()` refuses ("²", "①") never reach `int()`, and
never pass as a port (adversarial review 3, GV-12/13/20: the same bug outside the GPU pick)."""

from __future__ import annotations

import pytest

from desktop.qt.answer.citations import cite_number
from desktop.serve.origins import HostPolicy


@pytest.mark.parametrize("link", ["cite:²", "cite:①", "cite:", "cite:-1"])
def test_a_citation_link_with_no_plain_number_is_none(link: str) -> None:
    assert cite_number(link) is None


def test_a_citation_link_with_a_number_is_read() -> None:
    assert cite_number("cite:12") == 12


@pytest.mark.parametrize("host", ["localhost:²", "127.0.0.1:①", "[::1]:²"])
def test_a_host_header_whose_port_is_no_plain_number_is_refused(host: str) -> None:
    policy = HostPolicy.for_bind("127.0.0.1")
    assert not policy.allows(host)
    assert policy.allows(host.split("]")[0] + "]:8080" if host.startswith("[") else host.split(":")[0] + ":8080")
