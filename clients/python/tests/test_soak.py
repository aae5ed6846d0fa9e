"""A 15-second sample of the hostile-client soak (tools/soak_hostile.py):
Begin floods past the per-client limit, unread Files.Read and KV.Range
streams, Txns of many ranges and big Gets in parallel, while one
well-behaved client must see no failure and a p99 under 2 s, and the
server's RSS and threads stay bounded and come back down. The full run
(10 minutes, larger counts) is manual: see the script's header.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile

from conftest import REPO, cowkvd_path

SOAK = REPO / "tools" / "soak_hostile.py"


def soak(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SOAK), "--cowkvd", cowkvd_path(),
                           "--workdir", tempfile.gettempdir(), *args],
                          capture_output=True, text=True, timeout=timeout)


def verdict(r: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("soak: ")]
    assert len(lines) == 1, f"no verdict line (exit {r.returncode}):\n{r.stdout}\n{r.stderr}"
    return lines[0]


def test_soak_sample() -> None:
    r = soak("--seconds", "15", "--grace", "5", "--device-size", "1G",
             "--keys", "20000", "--file-mib", "16", "--big-values", "4", "--big-value-mib", "4",
             # 16 x 20 Begins from one address: past its limit of 256.
             "--txn-conns", "16", "--txn-per-conn", "20",
             "--unread-conns", "8", "--unread-per-conn", "4",
             "--txn-range-clients", "2", "--get-clients", "4",
             # Unread Gets too: their responses must stay within the budget
             # until read, and memory must be given back afterwards.
             "--unread-kinds", "read,range,get",
             "--max-rss", "1G", "--settle-rss", "512M")
    line = verdict(r)
    assert r.returncode == 0 and line.startswith("soak: PASS "), f"{line}\n{r.stderr}"
    figures = dict(f.split("=", 1) for f in line.split()[2:])
    assert int(figures["good_ops"]) >= 40 and figures["good_failures"] == "0", line
    assert int(figures["begin_refused"]) > 0, line


def test_soak_reports_a_broken_bound() -> None:
    # The same checks fail when a bound is out of reach: cowkvd alone holds
    # more than 32 MiB, so the soak must say FAIL, why, and exit 1.
    r = soak("--seconds", "3", "--grace", "0", "--device-size", "64M",
             "--keys", "1000", "--file-mib", "2", "--big-values", "1", "--big-value-mib", "1",
             "--txn-conns", "1", "--txn-per-conn", "1", "--unread-conns", "1",
             "--unread-per-conn", "2", "--txn-range-clients", "1", "--get-clients", "1",
             "--max-rss", "32M", timeout=120)
    line = verdict(r)
    assert r.returncode == 1 and line.startswith("soak: FAIL "), f"{line}\n{r.stderr}"
    assert "peak RSS" in line and "> --max-rss 32 MiB" in line, line
