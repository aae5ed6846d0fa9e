#!/usr/bin/env python3
"""Self-test of the conformance driver (driver.py), standard library only.

Runs the driver end to end against a fake cowkvd (a script that listens on a
free port, records its arguments and exits 0 on SIGTERM) and a fake adapter
(this file with --fake-adapter: an in-memory KV speaking the adapter
protocol, logging every request), and checks expansion, bytes on the wire,
matchers, save, errors, dedicated servers with tokens and the client_side
pass; then that each kind of wrong outcome fails its scenario with a message
naming it. Plus table tests of match() and expand().

    python3 clients/conformance/driver_test.py      # exit 0 = all passed
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import unittest
from typing import Any, Dict, List, Tuple

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import driver  # noqa: E402

FAKE_COWKVD = """#!/usr/bin/env python3
import json, os, signal, socket, sys
args = sys.argv[1:]
token = ""
if "--auth-token-file" in args:
    token = open(args[args.index("--auth-token-file") + 1]).read()
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
port = s.getsockname()[1]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps({"server": args, "token": token, "port": port}) + "\\n")
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print(f"cowkvd: serving on 127.0.0.1:{port} (port {port})", file=sys.stderr, flush=True)
while True:
    signal.pause()
"""


# --- the fake adapter ------------------------------------------------------


def reachable(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


def fake_op(state: Dict[str, Any], op: str, a: Dict[str, Any]) -> Dict[str, Any]:
    """One op of an in-memory KV; {"result"} or {"error"}."""
    if op == "connect":
        state["address"] = a["address"]
        return {"result": {}}
    if op == "reset":  # forgets the store too, so that revisions start at 1
        state.clear()
        return {"result": {}}
    if op == "echo":
        return {"result": {"args": a}}
    if op == "error":  # answers the error object it was given
        return {"error": a["err"]}
    if op == "put" and not a.get("key"):
        return {"error": {"class": "invalid_argument", "is": []}}  # refused client-side
    if not reachable(state["address"]):
        return {"error": {"class": "unavailable", "is": []}}
    kv = state.setdefault("kv", {})
    if op == "put":
        state["rev"] = state.get("rev", 0) + 1
        kv[(a.get("sv", ""), a["key"])] = (a.get("value", ""), state["rev"])
        return {"result": {"revision": state["rev"]}}
    if op == "get":
        if (a.get("sv", ""), a["key"]) not in kv:
            return {"error": {"class": "not_found", "is": [], "message": "no such key"}}
        value, rev = kv[(a.get("sv", ""), a["key"])]
        return {"result": {"key": a["key"], "value": value, "mod_revision": rev,
                           "revision": state["rev"]}}
    return {"fail": f"unknown op {op}"}


def fake_adapter(log: str) -> int:
    state: Dict[str, Any] = {}
    for line in sys.stdin:
        req = json.loads(line)
        with open(log, "a") as f:
            f.write(line)
        answer = fake_op(state, req["op"], req["args"])
        answer["id"] = req["id"]
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


# --- running the driver ----------------------------------------------------


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def run_driver(scenarios: List[Dict[str, Any]]) -> Tuple[int, str, List[Dict[str, Any]]]:
    """Runs driver.py on `scenarios`; returns exit status, output and the
    fake processes' log (adapter requests and server starts)."""
    with tempfile.TemporaryDirectory(prefix="driver-test-") as tmp:
        t = pathlib.Path(tmp)
        cowkvd = t / "cowkvd"
        cowkvd.write_text(FAKE_COWKVD)
        cowkvd.chmod(0o755)
        log = t / "log"
        log.touch()
        (t / "s.json").write_text(json.dumps({"format": 1, "scenarios": scenarios}))
        adapter = f"{sys.executable} {pathlib.Path(__file__).resolve()} --fake-adapter {log}"
        proc = subprocess.run(
            [sys.executable, str(HERE / "driver.py"), "--adapter", adapter,
             "--cowkvd", str(cowkvd), "--scenarios", str(t / "s.json")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
            env=dict(os.environ, FAKE_LOG=str(log)))
        entries = [json.loads(x) for x in log.read_text().splitlines()]
        return proc.returncode, proc.stdout, entries


def step(op: str, args: Dict[str, Any], expect: Any = None, **kw: Any) -> Dict[str, Any]:
    s: Dict[str, Any] = {"op": op, "args": args, **kw}
    if expect is not None:
        s["expect"] = expect
    return s


GOOD = [
    {"name": "values", "steps": [
        step("put", {"sv": "${sv}", "key": "k", "value": {"fill": "ab", "size": 5}},
             {"result": {"revision": {"$gt": 0, "$le": 1}}}, save={"rev": "revision"}),
        step("get", {"sv": "${sv}", "key": "k"},
             {"result": {"value": "ababa", "mod_revision": "${rev}", "revision": {"$ge": 1}}}),
        step("get", {"sv": "${sv}", "key": "k"}, {"result": {"value": {"base64": "YWJhYmE="}}},
             save={"v": "value"}),
        step("get", {"sv": "${sv}", "key": "nope"}, {"error": "not_found"}),
        step("echo", {"key": "${v}", "name": "x-${rev}-${run}", "n": "${rev}",
                      "data": {"base64": "AP8="}, "prefix": "p",
                      "list": [{"value": "v"}, {"value": "w"}]},
             {"result": {"args": {"key": "ababa", "n": 1, "data": {"base64": "AP8="},
                                  "list": {"$len": 2, "$contains": {"value": "w"},
                                           "$not_contains": {"value": "z"},
                                           "$all": {"value": {"$ne": "z"}}}}}},
             save={"w": "args.list.1.value"}),
        step("echo", {"value": "${w}"}, {"result": {"args": {"value": "w"}}}),
        step("error", {"err": {"class": "read_only", "is": ["failed_precondition"],
                               "errno": "EROFS"}}, {"error": "read_only", "errno": "EROFS"}),
        step("error", {"err": {"class": "compacted", "is": ["too_old"], "compact_revision": 7}},
             {"error": "compacted", "compact_revision": {"$ge": 7}}),
    ]},
    {"name": "dedicated", "server": {"auth_token": "tok-${run}", "create_size": "16M"},
     "steps": [step("put", {"key": "k", "value": "v"}),
               step("connect", {"token": "tok-${run}", "deadline_ms": 5}),
               step("stop_server", {}),
               step("get", {"key": "k"}, {"error": "unavailable"})]},
    {"name": "refused", "client_side": True,
     "steps": [step("put", {"key": ""}, {"error": "invalid_argument"})]},
]

# (scenario, what the failure message must say)
BAD: List[Tuple[Dict[str, Any], str]] = [
    ({"name": "wrong-value", "steps": [
        step("put", {"key": "a", "value": "1"}),
        step("get", {"key": "a"}, {"result": {"value": "2"}})]},
     'step 1 (get): result.value: want "2", got "1"'),
    ({"name": "gt-fails", "steps": [
        step("put", {"key": "a", "value": "1"}, {"result": {"revision": {"$gt": 100}}})]},
     "result.revision: $gt 100 does not hold"),
    ({"name": "missing-field", "steps": [
        step("echo", {"a": 1}, {"result": {"args": {"b": 1}}})]}, "result.args.b: missing"),
    ({"name": "wrong-class", "steps": [
        step("get", {"key": "zz"}, {"error": "already_exists"})]},
     "want error already_exists, got not_found"),
    ({"name": "want-success", "steps": [step("get", {"key": "zz"})]},
     "want success, got not_found"),
    ({"name": "want-error", "steps": [
        step("put", {"key": "a", "value": "1"}, {"error": "not_found"})]},
     "want error not_found, got result"),
    ({"name": "wrong-errno", "steps": [
        step("error", {"err": {"class": "not_found", "is": [], "errno": "ENOENT"}},
             {"error": "not_found", "errno": "ENOTDIR"})]}, "want errno ENOTDIR, got ENOENT"),
    ({"name": "no-parent", "steps": [
        step("error", {"err": {"class": "no_space", "is": []}}, {"error": "no_space"})]},
     "no_space is not also a resource_exhausted"),
    ({"name": "client-side-reached-network", "client_side": True, "steps": [
        step("put", {"key": "a", "value": "1"})]},
     "[client_side pass]: step 0 (put): want success, got unavailable"),
    ({"name": "unset-variable", "steps": [step("get", {"key": "${nope}"})]},
     "variable ${nope} is not set"),
    ({"name": "adapter-fail", "steps": [step("frobnicate", {})]}, "unknown op frobnicate"),
    ({"name": "len-fails", "steps": [
        step("echo", {"l": [1, 2]}, {"result": {"args": {"l": {"$len": 3}}}})]},
     "$len 3 does not hold"),
    ({"name": "contains-fails", "steps": [
        step("echo", {"l": [1, 2]}, {"result": {"args": {"l": {"$contains": 3}}}})]},
     "$contains 3 does not hold"),
]


class EndToEnd(unittest.TestCase):
    def test_good_scenarios_pass(self) -> None:
        code, out, log = run_driver(GOOD)
        self.assertEqual(code, 0, out)
        self.assertIn("conformance: 3/3 scenarios passed", out)
        reqs = [e for e in log if "op" in e]
        servers = [e for e in log if "server" in e]
        # Bytes go base64 on the wire, names as text; ${sv} and ${run} expanded.
        put = reqs[1]
        self.assertEqual(put["op"], "put")
        self.assertEqual(put["args"]["key"], b64("k"))
        self.assertEqual(put["args"]["value"], b64("ababa"))
        run = servers[0]["server"] and put["args"]["sv"].split("-")[1]
        self.assertEqual(put["args"]["sv"], f"c-{run}-values")
        echo = next(r for r in reqs if r["op"] == "echo")
        self.assertEqual(echo["args"]["name"], f"x-1-{run}")
        self.assertEqual(echo["args"]["n"], 1)  # a whole ${var} keeps its type
        self.assertEqual(echo["args"]["data"], "AP8=")
        self.assertEqual(echo["args"]["prefix"], b64("p"))
        # The dedicated server got its expanded token file and --create-size.
        ded = [s for s in servers if "--auth-token-file" in s["server"]]
        self.assertEqual(len(ded), 1)
        self.assertEqual(ded[0]["token"], f"tok-{run}")
        self.assertIn("16M", ded[0]["server"])
        connects = [r["args"] for r in reqs if r["op"] == "connect"]
        self.assertIn({"address": f"127.0.0.1:{ded[0]['port']}", "token": f"tok-{run}",
                       "deadline_ms": 5}, connects)
        # client_side: a second pass dialed to an address where nothing listens.
        refused = connects[-2:]
        self.assertNotEqual(refused[0]["address"], refused[1]["address"])
        self.assertFalse(reachable(refused[1]["address"]))
        # Each pass of each scenario ends with a reset.
        self.assertEqual(sum(r["op"] == "reset" for r in reqs), 4)

    def test_each_wrong_outcome_fails_its_scenario(self) -> None:
        code, out, _ = run_driver([s for s, _ in BAD])
        self.assertEqual(code, 1, out)
        self.assertIn(f"conformance: 0/{len(BAD)} scenarios passed", out)
        lines = out.splitlines()
        for scenario, message in BAD:
            fail = [x for x in lines if x.startswith(f"FAIL {scenario['name']}")]
            self.assertEqual(len(fail), 1, f"{scenario['name']}: {out}")
            self.assertIn(message, fail[0])

    def test_one_failure_leaves_the_others_running(self) -> None:
        code, out, _ = run_driver([BAD[0][0], GOOD[0]])
        self.assertEqual(code, 1, out)
        self.assertIn("ok   values", out)
        self.assertIn("conformance: 1/2 scenarios passed", out)


class Matching(unittest.TestCase):
    HOLDS = [
        (1, 1), ("ab", b"ab"), (b"\x00", b"\x00"), (True, True), ({"$gt": 1}, 2),
        ({"$ge": 2}, 2), ({"$lt": 3}, 2), ({"$le": 2}, 2), ({"$ne": 1}, 2), ({"$ne": "a"}, b"b"),
        ({"$len": 2}, [1, 2]), ({"$min_len": 1}, [1, 2]), ({"$contains": {"a": 1}}, [{"a": 1}]),
        ({"$not_contains": 3}, [1, 2]), ({"$all": {"$gt": 0}}, [1, 2]), ({"$all": 1}, []),
        ({"a": 1}, {"a": 1, "b": 2}), ([1, {"$gt": 1}], [1, 2]), ({"$gt": 1, "$lt": 3}, 2),
        ({}, {"x": 1}),
    ]
    FAILS = [
        (1, 2), ("ab", b"ac"), (True, 1), (0, False), ({"$gt": 2}, 2), ({"$ge": 3}, 2),
        ({"$lt": 2}, 2), ({"$le": 1}, 2), ({"$gt": 0}, "1"), ({"$ne": 1}, 1), ({"$len": 1}, [1, 2]),
        ({"$len": 0}, 0), ({"$min_len": 3}, [1, 2]), ({"$contains": 3}, [1, 2]),
        ({"$not_contains": 2}, [1, 2]), ({"$all": {"$gt": 1}}, [1, 2]), ({"a": 1}, {"b": 1}),
        ({"a": 1}, [1]), ([1], [1, 2]), ([1, 2], [2, 1]), ({"$gt": 1, "$lt": 2}, 2),
        ({"$bogus": 1}, 1),
    ]

    def test_holds(self) -> None:
        for expected, actual in self.HOLDS:
            with self.subTest(expected=expected, actual=actual):
                driver.match(expected, actual)

    def test_fails(self) -> None:
        for expected, actual in self.FAILS:
            with self.subTest(expected=expected, actual=actual):
                with self.assertRaises(driver.Mismatch):
                    driver.match(expected, actual)


class Values(unittest.TestCase):
    def test_expand(self) -> None:
        env = {"n": 5, "b": b"\x00\xff", "s": "x"}
        self.assertEqual(driver.expand("${n}", env), 5)
        self.assertEqual(driver.expand("${b}", env), b"\x00\xff")
        self.assertEqual(driver.expand("a${n}-${s}", env), "a5-x")
        self.assertEqual(driver.expand({"fill": "abc", "size": 7}, env), b"abcabca")
        self.assertEqual(driver.expand({"fill": "${s}", "size": "${n}"}, env), b"xxxxx")
        self.assertEqual(driver.expand({"fill": "a", "size": 0}, env), b"")
        self.assertEqual(driver.expand({"base64": "AP8="}, env), b"\x00\xff")
        # Not a spec unless the keys are exactly those.
        self.assertEqual(driver.expand({"fill": "a", "size": 1, "x": 1}, env),
                         {"fill": "a", "size": 1, "x": 1})
        self.assertEqual(driver.expand([{"k": "${s}"}], env), [{"k": "x"}])
        with self.assertRaises(driver.Mismatch):
            driver.expand("${missing}", env)

    def test_wire_forms(self) -> None:
        args = {"key": b"\xff", "name": "n", "prefix": "p", "n": 3,
                "success": [{"put": {"key": "k", "value": "v"}}]}
        wire = driver.encode_args("txn", args)
        self.assertEqual(wire, {"key": "/w==", "name": "n", "prefix": b64("p"), "n": 3,
                                "success": [{"put": {"key": b64("k"), "value": b64("v")}}]})
        self.assertEqual(driver.encode_args("put_many", {"prefix": "p"}), {"prefix": "p"})
        self.assertEqual(driver.encode_args("watch", {"prefix": True}), {"prefix": True})
        res = driver.decode_result({"keys": ["/w=="], "name": "/w==",
                                    "events": [{"prev_value": ""}]})
        self.assertEqual(res, {"keys": [b"\xff"], "name": "/w==", "events": [{"prev_value": b""}]})

    def test_lookup(self) -> None:
        r = {"extents": [{"physical": 9}]}
        self.assertEqual(driver.lookup(r, "extents.0.physical"), 9)
        with self.assertRaises(driver.Mismatch):
            driver.lookup(r, "extents.1.physical")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--fake-adapter":
        sys.exit(fake_adapter(sys.argv[2]))
    unittest.main()
