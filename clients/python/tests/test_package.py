"""The package as installed: its version is the proto's (proto/VERSION), it needs only
grpcio and protobuf, ships py.typed and its generated stubs, and its enums are the
proto's. (That the stubs match proto/ is checked by `gen_stubs.py --check`.)"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import claimd
from claimd import Decision, OrphanReason, State
from claimd.v1 import claims_pb2, claims_pb2_grpc


def proto_version() -> str:
    """proto/VERSION of the repository the suite runs from."""
    proto_dir = os.environ.get("CLAIMD_PROTO_DIR") or str(
        Path(__file__).resolve().parents[3] / "proto"
    )
    return (Path(proto_dir) / "VERSION").read_text(encoding="utf-8").strip()


def test_the_package_version_is_the_proto_version() -> None:
    assert claimd.__version__ == proto_version()
    assert importlib.metadata.version("claimd") == claimd.__version__


def test_only_grpcio_and_protobuf_are_required_at_run_time() -> None:
    requires = importlib.metadata.requires("claimd") or []
    names = {re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0].lower()
             for r in requires if "extra ==" not in r}
    assert names == {"grpcio", "protobuf"}, requires
    extras = set(importlib.metadata.metadata("claimd").get_all("Provides-Extra") or [])
    assert extras == {"fastapi", "flask", "django"}


def test_the_middleware_imports_no_framework() -> None:
    # claimd.fastapi and claimd.django import theirs; nothing else does, claimd itself neither.
    script = ("import sys, claimd, claimd.asgi, claimd.wsgi; "
              "print(sorted({'fastapi', 'starlette', 'flask', 'werkzeug', 'django'} "
              "& set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(os.environ.get("CLAIMD_EXPECT_WHEEL") != "1", reason="run from a checkout")
def test_the_suite_runs_against_the_installed_wheel_not_the_checkout() -> None:
    location = Path(claimd.__file__).resolve()
    assert "site-packages" in location.parts, location
    installed = {str(f) for f in importlib.metadata.files("claimd") or []}
    assert "claimd/py.typed" in installed
    assert not any(name.startswith("tests/") for name in installed)


def test_the_package_ships_py_typed_and_its_generated_stubs() -> None:
    package = importlib.resources.files("claimd")
    for name in ("py.typed", "v1/claims_pb2.py", "v1/claims_pb2.pyi", "v1/claims_pb2_grpc.py"):
        assert package.joinpath(name).is_file(), name
    assert claims_pb2.DESCRIPTOR.name == "claimd/v1/claims.proto"
    assert claims_pb2.DESCRIPTOR.package == "claimd.v1"
    assert hasattr(claims_pb2_grpc, "ClaimServiceStub")


def test_the_enums_are_the_protos_enums() -> None:
    for enum_type, prefix, proto in (
        (Decision, "DECISION_", claims_pb2.Decision),
        (State, "STATE_", claims_pb2.State),
        (OrphanReason, "ORPHAN_REASON_", claims_pb2.OrphanReason),
    ):
        wire = {name: number for name, number in proto.items() if not name.endswith("UNSPECIFIED")}
        assert {prefix + m.name: m.value for m in enum_type} == wire
