"""Run a command without the power to ignore file permissions, so an unreadable file or
directory is really unreadable to it: as root (CI containers) that means dropping
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH with setpriv; anyone else already lacks them."""

from __future__ import annotations

import os
import shutil

import pytest


def unprivileged(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be enforced")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search", *cmd]
