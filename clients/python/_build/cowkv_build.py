"""PEP 517 build backend: setuptools, after generating the gRPC stubs.

Every build entry point (wheel, editable, sdist) first runs grpcio-tools'
protoc over the API's .proto files and writes the stubs to src/cowkv/v1/:
`*_pb2.py` (messages), `*_pb2.pyi` (their types) and `*_pb2_grpc.py`
(service stubs). The stubs are generated, never edited or committed
(clients/python/.gitignore), so they cannot drift from proto/.

Where the .proto files come from, first match wins:
  1. $COWKV_PROTO_DIR (a directory holding cowkv/v1/*.proto);
  2. ../../proto, the repository's proto/ (building from a checkout);
  3. ./proto, the copy an sdist carries (build_sdist puts it there).
"""

from __future__ import annotations

import os
import pathlib
import shutil
from typing import Any, Dict, List, Optional

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401  (re-exported hooks)
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

_HERE = pathlib.Path(__file__).resolve().parent.parent  # clients/python
_OUT = _HERE / "src"
_PACKAGE = _OUT / "cowkv" / "v1"


def _proto_root() -> pathlib.Path:
    candidates = [os.environ.get("COWKV_PROTO_DIR", ""), _HERE.parent.parent / "proto", _HERE / "proto"]
    for c in candidates:
        if c and (pathlib.Path(c) / "cowkv" / "v1").is_dir():
            return pathlib.Path(c).resolve()
    raise RuntimeError(
        "cowkv build: cannot find cowkv/v1/*.proto (set COWKV_PROTO_DIR, or build "
        "from the repository's clients/python)")


def generate_stubs() -> List[pathlib.Path]:
    """Writes src/cowkv/v1/ from the .proto files; returns the protos used."""
    from grpc_tools import protoc  # a build requirement (pyproject.toml)
    import grpc_tools

    root = _proto_root()
    protos = sorted((root / "cowkv" / "v1").glob("*.proto"))
    if not protos:
        raise RuntimeError(f"cowkv build: no .proto files in {root}/cowkv/v1")
    if _PACKAGE.exists():
        shutil.rmtree(_PACKAGE)  # no stale stub of a removed .proto survives
    _PACKAGE.mkdir(parents=True)
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = ["grpc_tools.protoc", f"-I{root}", f"-I{well_known}",
            f"--python_out={_OUT}", f"--pyi_out={_OUT}", f"--grpc_python_out={_OUT}"]
    args += [str(p.relative_to(root)) for p in protos]
    # protoc resolves the relative proto names against -I{root}.
    cwd = os.getcwd()
    try:
        os.chdir(root)
        rc = protoc.main(args)
    finally:
        os.chdir(cwd)
    if rc != 0:
        raise RuntimeError(f"cowkv build: protoc failed with exit code {rc}")
    (_PACKAGE / "__init__.py").write_text(
        '"""Generated from proto/cowkv/v1 by grpcio-tools at build time; do not edit."""\n')
    return protos


def _copy_protos_for_sdist(protos: List[pathlib.Path]) -> bool:
    """Copies the protos to ./proto for the sdist; False if already there."""
    dest = _HERE / "proto" / "cowkv" / "v1"
    if protos and protos[0].parent.resolve() == dest.resolve():
        return False  # building from an sdist: the copy is already there
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for p in protos:
        shutil.copy2(p, dest / p.name)
    return True


def _clean_build_tree() -> None:
    """Removes setuptools' build/ directory: it copies packages into
    build/lib and never removes what is no longer part of the package, so a
    module dropped since the last build would still land in the wheel."""
    shutil.rmtree(_HERE / "build", ignore_errors=True)


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    generate_stubs()
    _clean_build_tree()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    generate_stubs()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    copied = _copy_protos_for_sdist(generate_stubs())
    try:
        return _setuptools.build_sdist(sdist_directory, config_settings)
    finally:
        if copied:  # the repository's proto/ stays the one source
            shutil.rmtree(_HERE / "proto")
