"""The API's settings refuse combinations that cannot work, with a line that says why."""

from __future__ import annotations

import pytest

from delayline.api.config import ApiConfig
from delayline.cli import main
from delayline.errors import ConfigError


def test_reads_that_need_a_token_without_a_token_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"reads need a token .* --token"):
        ApiConfig(reads_need_token=True)
    assert ApiConfig(reads_need_token=True, token="t").reads_need_token


def test_the_cli_says_so_instead_of_starting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["api", "--reads-need-token", "--port", "0"]) != 0
    err = capsys.readouterr().err
    assert "reads need a token" in err
    assert "writes are disabled" not in err
