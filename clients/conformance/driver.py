#!/usr/bin/env python3
"""The conformance driver: runs clients/conformance/scenarios.json through one
client's adapter against live cowkvd processes.

    driver.py --adapter 'CMD ...' [--cowkvd PATH] [--only NAME ...]
              [--scenarios FILE]

The driver owns everything the README's "Values", "Matching" and "Runner
control" sections describe: cowkvd lifecycle (one shared server, dedicated
ones, auth tokens, the client_side run against a dead port), variables and
`${...}` expansion, bytes forms, matchers, `save`, and failure messages. The
adapter (one per client language) only maps one JSON op per line to client
calls; the protocol is in README.md, "Adapter protocol". Exit status 0 when
every scenario passed, 1 when one failed, 2 on a usage or setup error; the
last line is a summary. Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import pathlib
import re
import secrets
import select
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
_VAR = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
_PORT_LINE = re.compile(r"\(port (\d+)\)")

# Ops the driver runs itself; every other op goes to the adapter.
DRIVER_OPS = {"connect", "stop_server", "pause_server", "resume_server", "sleep",
              "restart_server", "repeat"}
# Argument names that are bytes wherever they appear in an op's args (also
# inside txn compares and ops); `prefix` too, except in these ops (a string
# there, or watch's bool).
BYTES_ARGS = {"key", "value", "start", "end", "page_token", "data", "interfere", "prefix",
              "stream"}
STRING_PREFIX_OPS = {"put_many", "link_many", "file_watch"}
# Result field names that are bytes wherever they appear in a result.
BYTES_RESULTS = {"key", "value", "keys", "values", "data", "next_page_token", "prev_value",
                 "stream"}
# What an error class must also be (the README's "is-a" parents).
PARENTS = {"read_only": "failed_precondition", "no_space": "resource_exhausted",
           "compacted": "too_old"}
# Longest a single adapter op may take (put_many of a million keys is the
# slowest one in the file); the adapter bounds watch reads to 10 s itself.
OP_TIMEOUT_S = float(os.environ.get("COWKV_CONFORMANCE_OP_TIMEOUT", "1200"))


class Mismatch(Exception):
    """A step's outcome differs from its expectation."""


class AdapterError(Exception):
    """The adapter broke the protocol, exited or did not answer in time."""


# --- values ----------------------------------------------------------------


def text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    return str(v)


def as_bytes(v: Any) -> bytes:
    if isinstance(v, bytes):
        return v
    return text(v).encode("utf-8", "surrogateescape")


def expand(value: Any, env: Dict[str, Any]) -> Any:
    """Variables, base64 and fill specs, recursively (README "Values")."""
    if isinstance(value, str):
        whole = _VAR.fullmatch(value)
        if whole:
            return lookup_var(env, whole.group(1))
        return _VAR.sub(lambda m: text(lookup_var(env, m.group(1))), value)
    if isinstance(value, list):
        return [expand(v, env) for v in value]
    if isinstance(value, dict):
        if set(value) == {"base64"}:
            return base64.b64decode(expand(value["base64"], env), validate=True)
        if set(value) == {"fill", "size"}:
            fill = as_bytes(expand(value["fill"], env))
            size = int(expand(value["size"], env))
            if not fill and size:
                raise Mismatch("fill spec with an empty fill")
            return (fill * (size // max(len(fill), 1) + 1))[:size]
        return {k: expand(v, env) for k, v in value.items()}
    return value


def lookup_var(env: Dict[str, Any], name: str) -> Any:
    if name not in env:
        raise Mismatch(f"variable ${{{name}}} is not set")
    return env[name]


def b64(v: bytes) -> str:
    return base64.b64encode(v).decode("ascii")


def encode_args(op: str, value: Any, name: str = "") -> Any:
    """Expanded args -> wire form: bytes fields (BYTES_ARGS) as base64,
    every other bytes value (a saved token used as a name) as UTF-8 text."""
    is_bytes = name in BYTES_ARGS and not (name == "prefix" and op in STRING_PREFIX_OPS)
    if isinstance(value, dict):
        return {k: encode_args(op, v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [encode_args(op, v, name) for v in value]
    if isinstance(value, (str, bytes)):
        return b64(as_bytes(value)) if is_bytes else text(value)
    return value


def decode_result(value: Any, name: str = "") -> Any:
    """Wire result -> canonical: BYTES_RESULTS fields from base64 to bytes."""
    if isinstance(value, dict):
        return {k: decode_result(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_result(v, name) for v in value]
    if name in BYTES_RESULTS and isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            raise AdapterError(f"result field {name!r} is not base64: {value!r}") from None
    return value


# --- matching --------------------------------------------------------------


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def scalar_eq(expected: Any, actual: Any) -> bool:
    if isinstance(expected, (str, bytes)) and isinstance(actual, (str, bytes)):
        return as_bytes(expected) == as_bytes(actual)
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return bool(expected == actual)


def matches(expected: Any, actual: Any) -> bool:
    try:
        match(expected, actual)
        return True
    except Mismatch:
        return False


def _is_list(v: Any) -> bool:
    return isinstance(v, list)


OPERATORS: Dict[str, Callable[[Any, Any], bool]] = {
    "$gt": lambda a, x: is_int(x) and x > a,
    "$ge": lambda a, x: is_int(x) and x >= a,
    "$lt": lambda a, x: is_int(x) and x < a,
    "$le": lambda a, x: is_int(x) and x <= a,
    "$ne": lambda a, x: not scalar_eq(a, x),
    "$len": lambda a, x: _is_list(x) and len(x) == a,
    "$min_len": lambda a, x: _is_list(x) and len(x) >= a,
    "$contains": lambda a, x: _is_list(x) and any(matches(a, e) for e in x),
    "$not_contains": lambda a, x: _is_list(x) and not any(matches(a, e) for e in x),
    "$all": lambda a, x: _is_list(x) and all(matches(a, e) for e in x),
}


def show(v: Any) -> str:
    """A value for a failure message: bytes as text when printable."""
    if isinstance(v, bytes):
        try:
            s = v.decode("utf-8")
            if s.isprintable() and len(s) <= 200:
                return json.dumps(s)
        except UnicodeDecodeError:
            pass
        return f"<{len(v)} bytes: {v[:64]!r}{'...' if len(v) > 64 else ''}>"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {show(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        items = [show(x) for x in v[:20]]
        return "[" + ", ".join(items) + (f", ... ({len(v)} in all)" if len(v) > 20 else "") + "]"
    return json.dumps(v)


def match(expected: Any, actual: Any, where: str = "result") -> None:
    """README "Matching"; raises Mismatch naming the first difference."""
    if isinstance(expected, dict) and expected and all(k.startswith("$") for k in expected):
        for op, arg in expected.items():
            if op not in OPERATORS:
                raise Mismatch(f"{where}: unknown matcher {op}")
            if not OPERATORS[op](arg, actual):
                raise Mismatch(f"{where}: {op} {show(arg)} does not hold for {show(actual)}")
    elif isinstance(expected, dict):
        if not isinstance(actual, dict):
            raise Mismatch(f"{where}: want an object, got {show(actual)}")
        for k, v in expected.items():
            if k not in actual:
                raise Mismatch(f"{where}.{k}: missing from {show(actual)}")
            match(v, actual[k], f"{where}.{k}")
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            raise Mismatch(f"{where}: want {show(expected)}, got {show(actual)}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            match(e, a, f"{where}.{i}")
    elif not scalar_eq(expected, actual):
        raise Mismatch(f"{where}: want {show(expected)}, got {show(actual)}")


def lookup(result: Any, path: str) -> Any:
    """`save` paths: dot-separated keys, numbers index arrays."""
    try:
        for part in path.split("."):
            result = result[int(part)] if isinstance(result, list) else result[part]
    except (KeyError, IndexError, ValueError, TypeError):
        raise Mismatch(f"save: no {path!r} in the result {show(result)}") from None
    return result


# --- servers ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """One cowkvd process on `device`, listening on a free loopback port."""

    def __init__(self, cowkvd: str, device: pathlib.Path, create_size: str,
                 extra: List[str]) -> None:
        self.cowkvd = cowkvd
        self.device = device
        self.create_size = create_size
        self.extra = extra
        self.log: List[str] = []
        self.proc: Optional["subprocess.Popen[str]"] = None
        self.port = 0
        self.paused = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "Server":
        cmd = [self.cowkvd, "--device", str(self.device), "--create-size", self.create_size,
               "--listen", "127.0.0.1:0", "--metrics-listen", "", *self.extra]
        self.port = 0
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        ready = threading.Event()
        threading.Thread(target=self._drain, args=(self.proc, ready), daemon=True).start()
        if not ready.wait(timeout) or not self.port:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("cowkvd did not start:\n" + "".join(self.log[-30:]))
        return self

    def _drain(self, proc: "subprocess.Popen[str]", ready: threading.Event) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.log.append(line)
            m = _PORT_LINE.search(line)
            if m and not ready.is_set():
                self.port = int(m.group(1))
                ready.set()
        ready.set()  # exited before serving

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def resume(self) -> None:
        if self.running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def pause(self) -> None:
        assert self.proc is not None
        self.paused = True
        self.proc.send_signal(signal.SIGSTOP)
        wait_stopped(self.proc.pid)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGCONT if paused, SIGTERM (drain, commit, exit); exit 0 or Mismatch."""
        if not self.running():
            return
        assert self.proc is not None
        self.resume()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Mismatch(f"cowkvd did not stop within {timeout} s") from None
        if code != 0:
            raise Mismatch(f"cowkvd exited {code}:\n" + "".join(self.log[-30:]))

    def kill(self) -> None:
        if self.running():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()


def wait_stopped(pid: int, timeout: float = 10.0) -> None:
    """Until every thread of `pid` is stopped (state T in /proc): SIGSTOP is
    asynchronous, and a thread still running could answer the next call."""
    end = time.monotonic() + timeout
    while True:
        states = []
        for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
            try:
                states.append(task.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):
                pass  # a thread that just ended
        if states and all(st in ("T", "t") for st in states):
            return
        if time.monotonic() > end:
            raise Mismatch(f"cowkvd {pid} not stopped after {timeout} s: {states}")
        time.sleep(0.005)


def corrupt(device: pathlib.Path, offset: int, length: int) -> None:
    """Inverts (XOR 0xFF) `length` bytes of `device` at `offset`."""
    with open(device, "r+b") as f:
        f.seek(offset)
        data = f.read(length)
        f.seek(offset)
        f.write(bytes(b ^ 0xFF for b in data))


# --- the adapter process ---------------------------------------------------


class Adapter:
    """The adapter process: one JSON request per line on its stdin, one
    answer per line on its stdout; its stderr goes to ours."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.next_id = 0
        self.proc = subprocess.Popen(shlex.split(command), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, bufsize=0)
        self.buf = b""

    def call(self, op: str, args: Dict[str, Any], timeout: float = OP_TIMEOUT_S) -> Dict[str, Any]:
        """Sends one op; returns the answer ({"result"} or {"error"})."""
        self.next_id += 1
        line = json.dumps({"id": self.next_id, "op": op, "args": args}) + "\n"
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode("utf-8"))
        except BrokenPipeError:
            raise AdapterError(f"the adapter exited ({self.proc.poll()})") from None
        answer = json.loads(self._read_line(timeout))
        if not isinstance(answer, dict) or answer.get("id") != self.next_id:
            raise AdapterError(f"answer for request {self.next_id} expected, got {answer!r}")
        if "fail" in answer:
            raise AdapterError(f"the adapter failed on {op}: {answer['fail']}")
        if "result" not in answer and not isinstance(answer.get("error"), dict):
            raise AdapterError(f"answer without result or error: {answer!r}")
        return answer

    def _read_line(self, timeout: float) -> bytes:
        assert self.proc.stdout is not None
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not ready:
                self.close()
                raise AdapterError(f"no answer within {timeout:.0f} s; adapter killed")
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not chunk:
                raise AdapterError(f"the adapter exited ({self.proc.wait()})")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()  # EOF: the adapter exits
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- running scenarios -----------------------------------------------------


class ScenarioRun:
    """One pass of one scenario: its variables, its server, the adapter's
    client options."""

    def __init__(self, scenario: Dict[str, Any], env: Dict[str, Any], server: Server,
                 dedicated: bool, dead: bool, adapter: Adapter) -> None:
        self.name = scenario["name"]
        self.env = env
        self.server = server
        self.dedicated = dedicated
        self.adapter = adapter
        self.dead_addr = f"127.0.0.1:{free_port()}" if dead else ""
        self.token = ""
        self.deadline_ms = 0

    def connect(self) -> None:
        addr = self.dead_addr or self.server.address
        answer = self.adapter.call("connect", {"address": addr, "token": self.token,
                                               "deadline_ms": self.deadline_ms})
        if "error" in answer:
            raise Mismatch(f"connect: {answer['error']}")

    def run_step(self, where: str, step: Dict[str, Any]) -> None:
        op = step["op"]
        where = f"{where} ({op})"
        args = expand(step.get("args", {}), self.env)
        if op in DRIVER_OPS:
            answer: Dict[str, Any] = {"result": getattr(self, "op_" + op)(args, where)}
        else:
            answer = self.adapter.call(op, encode_args(op, args))
        expect = step.get("expect")
        if "error" in answer:
            self.check_error(where, expect, answer["error"])
            return
        result = decode_result(answer["result"])
        if expect is not None and "error" in expect:
            raise Mismatch(f"{where}: want error {expect['error']}, got result {show(result)}")
        if expect is not None and "result" in expect:
            match(expand(expect["result"], self.env), result, f"{where}: result")
        for var, path in step.get("save", {}).items():
            self.env[var] = lookup(result, path)

    def check_error(self, where: str, expect: Optional[Dict[str, Any]],
                    err: Dict[str, Any]) -> None:
        got = err.get("class")
        detail = f"{got}: {err.get('message', '')}"
        if expect is None or "error" not in expect:
            raise Mismatch(f"{where}: want success, got {detail}")
        if got != expect["error"]:
            raise Mismatch(f"{where}: want error {expect['error']}, got {detail}")
        parent = PARENTS.get(got or "")
        if parent and parent not in err.get("is", []):
            raise Mismatch(f"{where}: {got} is not also a {parent} (is: {err.get('is', [])})")
        if "errno" in expect and err.get("errno", "") != expect["errno"]:
            raise Mismatch(f"{where}: want errno {expect['errno']}, got "
                           f"{err.get('errno', '') or 'none'}: {detail}")
        if "compact_revision" in expect:
            match(expand(expect["compact_revision"], self.env), err.get("compact_revision"),
                  f"{where}: compact_revision")

    # Runner control (README "Runner control").

    def need_dedicated(self, where: str) -> None:
        if not self.dedicated:
            raise Mismatch(f"{where}: needs a dedicated server (a `server` field)")

    def op_connect(self, a: Dict[str, Any], where: str) -> Dict[str, Any]:
        self.token = text(a.get("token", ""))
        self.deadline_ms = int(a.get("deadline_ms", 0))
        self.connect()
        return {}

    def op_stop_server(self, a: Dict[str, Any], where: str) -> Dict[str, Any]:
        self.need_dedicated(where)
        self.server.stop()
        return {}

    def op_pause_server(self, a: Dict[str, Any], where: str) -> Dict[str, Any]:
        self.need_dedicated(where)
        self.server.pause()
        return {}

    def op_resume_server(self, a: Dict[str, Any], where: str) -> Dict[str, Any]:
        self.need_dedicated(where)
        self.server.resume()
        return {}

    def op_sleep(self, a: Dict[str, Any], where: str) -> Dict[str, Any]:
        time.sleep(int(a.get("ms", 0)) / 1000)
        return {}

    def op_restart_server(self, a: Dict[str, Any], where: str) -> Dict[str, Any]:
        self.need_dedicated(where)
        self.adapter.call("reset", {})  # close the client before the server goes
        self.server.stop()
        length = int(a.get("corrupt_length", 0))
        if length > 0:
            corrupt(self.server.device, int(a.get("corrupt_offset", 0)), length)
        self.server.start()
        self.connect()
        return {}

    def op_repeat(self, a: Dict[str, Any], where: str) -> Dict[str, Any]:
        step = a.get("step")
        if not isinstance(step, dict):
            raise Mismatch(f"{where}: repeat without a step")
        for i in range(int(a.get("times", 0))):
            self.run_step(f"{where} #{i}", step)
        return {}


class Driver:
    """Runs scenarios through one adapter; counts and reports."""

    def __init__(self, cowkvd: str, adapter_cmd: str, workdir: pathlib.Path,
                 out: Callable[[str], None] = print) -> None:
        self.cowkvd = cowkvd
        self.adapter_cmd = adapter_cmd
        self.workdir = workdir
        self.out = out
        self.run_id = secrets.token_hex(4)
        self.shared: Optional[Server] = None
        self.adapter: Optional[Adapter] = None
        self.failures: List[str] = []

    def adapter_proc(self) -> Adapter:
        if self.adapter is None or not self.adapter.alive():
            self.adapter = Adapter(self.adapter_cmd)
        return self.adapter

    def shared_server(self) -> Server:
        if self.shared is None:
            self.shared = Server(self.cowkvd, self.workdir / "shared.img", "256M", []).start()
        return self.shared

    def dedicated(self, scenario: Dict[str, Any], env: Dict[str, Any]) -> Server:
        spec = scenario["server"]
        extra: List[str] = []
        if "auth_token" in spec:
            token_file = self.workdir / f"{scenario['name']}.token"
            token_file.write_text(text(expand(spec["auth_token"], env)))
            extra = ["--auth-token-file", str(token_file)]
        device = self.workdir / f"{scenario['name']}.img"
        if device.exists():
            device.unlink()  # the client_side pass gets a fresh device too
        return Server(self.cowkvd, device, spec.get("create_size", "32M"), extra).start()

    def run_pass(self, scenario: Dict[str, Any], dead: bool) -> None:
        env: Dict[str, Any] = {"run": self.run_id, "sv": f"c-{self.run_id}-{scenario['name']}"}
        dedicated = "server" in scenario
        server = self.dedicated(scenario, env) if dedicated else self.shared_server()
        adapter = self.adapter_proc()
        run = ScenarioRun(scenario, env, server, dedicated, dead, adapter)
        try:
            run.connect()
            for i, step in enumerate(scenario["steps"]):
                run.run_step(f"step {i}", step)
        finally:
            try:
                if adapter.alive():
                    adapter.call("reset", {}, timeout=60)
            finally:
                if dedicated:
                    server.stop()

    def run_scenario(self, scenario: Dict[str, Any]) -> bool:
        started = time.monotonic()
        passes = [False, True] if scenario.get("client_side") else [False]
        for dead in passes:
            label = scenario["name"] + (" [client_side pass]" if dead else "")
            try:
                self.run_pass(scenario, dead)
            except (Mismatch, AdapterError, RuntimeError, OSError) as e:
                self.failures.append(f"{label}: {e}")
                self.out(f"FAIL {label}: {e}")
                return False
        self.out(f"ok   {scenario['name']} ({time.monotonic() - started:.1f} s)")
        return True

    def close(self) -> None:
        try:
            if self.adapter is not None:
                self.adapter.close()
        finally:
            if self.shared is not None:
                try:
                    self.shared.stop()
                except Mismatch as e:
                    self.failures.append(f"shared server: {e}")
                    self.out(f"FAIL shared server: {e}")


def load(path: pathlib.Path) -> List[Dict[str, Any]]:
    data = json.loads(path.read_text())
    if data.get("format") != 1:
        raise SystemExit(f"{path}: unknown format {data.get('format')!r}")
    scenarios: List[Dict[str, Any]] = data["scenarios"]
    return scenarios


def default_cowkvd() -> str:
    return os.environ.get("COWKVD") or str(REPO / "bazel-bin" / "server" / "cowkvd")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--adapter", required=True, help="the adapter's command line (shell words)")
    p.add_argument("--cowkvd", default=default_cowkvd(), help="the server binary ($COWKVD)")
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="run only this scenario (repeatable)")
    p.add_argument("--scenarios", type=pathlib.Path, default=HERE / "scenarios.json")
    a = p.parse_args(argv)
    if not os.access(a.cowkvd, os.X_OK):
        print(f"driver: cowkvd not found at {a.cowkvd}: set COWKVD or --cowkvd", file=sys.stderr)
        return 2
    scenarios = load(a.scenarios)
    unknown = set(a.only) - {s["name"] for s in scenarios}
    if unknown:
        print(f"driver: no scenario named {sorted(unknown)}", file=sys.stderr)
        return 2
    chosen = [s for s in scenarios if not a.only or s["name"] in a.only]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cowkv-conformance-") as tmp:
        driver = Driver(a.cowkvd, a.adapter, pathlib.Path(tmp))
        passed = 0
        try:
            passed = sum(driver.run_scenario(s) for s in chosen)
        finally:
            driver.close()
    ok = not driver.failures
    print(f"conformance: {passed}/{len(chosen)} scenarios passed in "
          f"{time.monotonic() - started:.1f} s ({a.adapter})" + ("" if ok else "; FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
