"""The cross-client conformance scenarios (clients/conformance/scenarios.json)
through this client: the shared driver (clients/conformance/driver.py) runs
every scenario with this client's adapter (tests/conformance_adapter.py, one
JSON op per line) against cowkvd processes it starts itself, and fails on
the first step of a scenario whose outcome differs. COWKV_SCENARIO=name runs
one scenario. Also runs the driver's own self-test (driver_test.py).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import conformance_adapter
from conftest import REPO, cowkvd_path

CONFORMANCE = REPO / "clients" / "conformance"
ADAPTER = REPO / "clients" / "python" / "tests" / "conformance_adapter.py"


def test_scenarios() -> None:
    cmd = [sys.executable, str(CONFORMANCE / "driver.py"),
           "--adapter", f"{sys.executable} {ADAPTER}", "--cowkvd", cowkvd_path()]
    if os.environ.get("COWKV_SCENARIO"):
        cmd += ["--only", os.environ["COWKV_SCENARIO"]]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout


def test_driver_self_test() -> None:
    proc = subprocess.run([sys.executable, str(CONFORMANCE / "driver_test.py")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout


def test_every_op_of_the_readme_is_implemented() -> None:
    spec = importlib.util.spec_from_file_location("driver", CONFORMANCE / "driver.py")
    assert spec is not None and spec.loader is not None
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    text = (CONFORMANCE / "README.md").read_text()
    ops_section = text[text.index("## Ops"):text.index("## What the file covers")]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", ops_section, re.M))
    missing = sorted(n for n in documented - driver.DRIVER_OPS
                     if not hasattr(conformance_adapter.Adapter, "op_" + n))
    assert not missing, f"ops in the README without an adapter op: {missing}"
