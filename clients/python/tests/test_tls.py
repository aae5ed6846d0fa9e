"""TLS: cowkvd started with --tls-cert/--tls-key serves the Python client
over TLS when the client trusts the certificate (``root_certificates``),
with a token on top; a plaintext client and a TLS client that does not
trust the certificate cannot call it (Unavailable).

The certificate is self-signed for 127.0.0.1 and made with ``openssl`` in
the test, as the TypeScript client's test does. The test is skipped only
when ``openssl`` is not on PATH.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
from typing import Tuple

import pytest

import cowkv
from conftest import Server


def self_signed(directory: pathlib.Path) -> Tuple[pathlib.Path, pathlib.Path]:
    """Writes a P-256 certificate for IP 127.0.0.1 and its key; returns their paths."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", "/CN=cowkvd test", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return cert, key


def test_tls_with_token(tmp_path: pathlib.Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not on PATH, so the test cannot make its self-signed "
                    "certificate; install openssl to run it")
    cert, key = self_signed(tmp_path)
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    srv = Server(tmp_path / "tls.img", "--tls-cert", str(cert), "--tls-key", str(key),
                 "--auth-token-file", str(token), create_size="32M").start()
    try:
        ca = cert.read_bytes()
        with cowkv.connect(srv.address, token="s3cret", root_certificates=ca, timeout=10,
                           wait_ready=10) as c:
            sv = c.subvolume()
            sv.put("tls-key", b"over tls")
            assert sv.get("tls-key") == b"over tls"
            sv.files.write_bytes("/tls.bin", bytes(range(256)) * 4096)  # 1 MiB, streamed
            assert sv.files.read_bytes("/tls.bin") == bytes(range(256)) * 4096
            assert c.version().api == "cowkv.v1"
            assert c.check().ok

        # TLS without the token: the server sees the call and refuses it.
        with cowkv.connect(srv.address, root_certificates=ca, timeout=10) as anon:
            with pytest.raises(cowkv.Unauthenticated):
                anon.subvolume().get("tls-key")
        # Plaintext to a TLS port: no connection, Unavailable.
        with cowkv.connect(srv.address, token="s3cret", timeout=5) as plain:
            with pytest.raises(cowkv.Unavailable):
                plain.subvolume().get("tls-key")
        # TLS that trusts only the system roots: the handshake fails, Unavailable.
        with cowkv.connect(srv.address, token="s3cret", tls=True, timeout=5) as untrusting:
            with pytest.raises(cowkv.Unavailable):
                untrusting.subvolume().get("tls-key")
    finally:
        assert srv.stop() == 0, "cowkvd did not stop cleanly:\n" + "".join(srv.log)
