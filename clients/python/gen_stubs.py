"""Regenerate, or check, the generated protobuf and gRPC modules committed in the package.

The package ships its stubs (src/claimd/v1/claims_pb2.py, claims_pb2.pyi,
claims_pb2_grpc.py, and src/claimd/_rpc/status_pb2.py/.pyi) so that it installs with
only grpcio and protobuf. They are generated from the repository's proto/ by the
grpcio-tools version pinned in requirements-dev.txt; any other version would write
different files, so this script refuses to run with another one.

    python gen_stubs.py           # regenerate the committed files after a proto change
    python gen_stubs.py --check   # exit 1, naming them, when the committed files are stale

`cargo test --test it polyglot::clients_python` runs the check.
"""

from __future__ import annotations

import argparse
import filecmp
import importlib.metadata
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
REPO_PROTO = HERE.parent.parent / "proto"
CLAIMS_PROTO = "claimd/v1/claims.proto"
STATUS_PROTO = "claimd/_rpc/status.proto"
# What protoc writes, relative to src/: every file here is committed and compared.
GENERATED = (
    "claimd/v1/claims_pb2.py",
    "claimd/v1/claims_pb2.pyi",
    "claimd/v1/claims_pb2_grpc.py",
    "claimd/_rpc/status_pb2.py",
    "claimd/_rpc/status_pb2.pyi",
)


def pinned_tools_version() -> str:
    """The grpcio-tools version pinned in requirements-dev.txt."""
    text = (HERE / "requirements-dev.txt").read_text(encoding="utf-8")
    found = re.search(r"^grpcio-tools==(\S+)", text, re.MULTILINE)
    if not found:
        raise RuntimeError("requirements-dev.txt pins no grpcio-tools version")
    return found.group(1)


def check_tools_version() -> None:
    """Raises unless the installed grpcio-tools is the pinned one."""
    pinned = pinned_tools_version()
    try:
        installed = importlib.metadata.version("grpcio-tools")
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(
            f"grpcio-tools is not installed: pip install -r requirements-dev.txt "
            f"(grpcio-tools=={pinned})"
        ) from None
    if installed != pinned:
        raise RuntimeError(
            f"grpcio-tools {installed} is installed, but the stubs are made with {pinned} "
            f"(requirements-dev.txt): another version writes different files"
        )


def protoc(args: list[str]) -> None:
    """Runs grpc_tools' bundled protoc with the well-known types on its path."""
    import grpc_tools
    from grpc_tools import protoc as grpc_protoc

    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    status = grpc_protoc.main(["grpc_tools.protoc", f"--proto_path={well_known}", *args])
    if status != 0:
        raise RuntimeError(f"protoc failed with status {status}")


def generate(out: Path, proto_root: Path = REPO_PROTO) -> None:
    """Writes every file of GENERATED under `out`."""
    if not (proto_root / CLAIMS_PROTO).is_file():
        raise FileNotFoundError(f"{CLAIMS_PROTO} not found under {proto_root} (use --proto)")
    out.mkdir(parents=True, exist_ok=True)
    protoc(
        [
            f"--proto_path={proto_root}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            CLAIMS_PROTO,
        ]
    )
    protoc([f"--proto_path={SRC}", f"--python_out={out}", f"--pyi_out={out}", STATUS_PROTO])


def stale_files(proto_root: Path = REPO_PROTO) -> list[str]:
    """The committed generated files that differ from a fresh generation (or are missing)."""
    with tempfile.TemporaryDirectory(prefix="claimd-stubs-") as tmp:
        generate(Path(tmp), proto_root)
        return [
            name
            for name in GENERATED
            if not (SRC / name).is_file()
            or not filecmp.cmp(Path(tmp) / name, SRC / name, shallow=False)
        ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare the committed files with a fresh generation; write nothing",
    )
    parser.add_argument(
        "--proto",
        type=Path,
        default=REPO_PROTO,
        help="the proto root holding claimd/v1/claims.proto (default: the repository's proto/)",
    )
    args = parser.parse_args(argv)
    try:
        check_tools_version()
        if args.check:
            stale = stale_files(args.proto)
            if stale:
                print(
                    "stale generated files (run `python gen_stubs.py` in clients/python): "
                    + ", ".join(stale),
                    file=sys.stderr,
                )
                return 1
            print(f"the {len(GENERATED)} generated files match {CLAIMS_PROTO}")
            return 0
        with tempfile.TemporaryDirectory(prefix="claimd-stubs-") as tmp:
            generate(Path(tmp), args.proto)
            for name in GENERATED:
                shutil.copyfile(Path(tmp) / name, SRC / name)
    except (OSError, RuntimeError) as error:
        print(f"gen_stubs: {error}", file=sys.stderr)
        return 1
    print(f"wrote {len(GENERATED)} files under src/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
