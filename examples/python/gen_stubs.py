"""Generate the Python gRPC stubs for claimd from the repository's proto.

The example itself no longer needs them: it uses the `claimd` package (clients/python),
which ships its own stubs. This writes the raw `claimd.v1` modules for code that wants
them without the package (run it after `pip install -r requirements.txt`, and again
whenever proto/claimd/v1/claims.proto changes); never put its output directory on the
path of a program that imports the package, whose `claimd` it would shadow.

    python gen_stubs.py                 # into _generated/ beside this file
    python gen_stubs.py --out /tmp/stubs
    CLAIMD_STUBS_DIR=/tmp/stubs python gen_stubs.py

The output holds the package `claimd.v1` (claims_pb2.py, claims_pb2_grpc.py and type
hints). grpcio-tools brings protoc and the well-known types (Duration, Timestamp), so no
protoc needs to be installed.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "_generated")
DEFAULT_PROTO_ROOT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "proto")
PROTO_FILE = os.path.join("claimd", "v1", "claims.proto")


def generate(out_dir, proto_root=DEFAULT_PROTO_ROOT):
    """Runs grpc_tools.protoc over claims.proto into out_dir; raises on failure."""
    import grpc_tools
    from grpc_tools import protoc

    proto_file = os.path.join(proto_root, PROTO_FILE)
    if not os.path.isfile(proto_file):
        raise FileNotFoundError(f"{proto_file} not found (use --proto)")
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    os.makedirs(out_dir, exist_ok=True)
    status = protoc.main(
        [
            "grpc_tools.protoc",
            f"--proto_path={proto_root}",
            f"--proto_path={well_known}",
            f"--python_out={out_dir}",
            f"--pyi_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            proto_file,
        ]
    )
    if status != 0:
        raise RuntimeError(f"protoc failed with status {status}")
    # Regular packages, so `import claimd.v1` cannot pick up another `claimd` on sys.path.
    for package in ("claimd", os.path.join("claimd", "v1")):
        open(os.path.join(out_dir, package, "__init__.py"), "a").close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        default=os.environ.get("CLAIMD_STUBS_DIR") or DEFAULT_OUT,
        help="output directory (default: $CLAIMD_STUBS_DIR or _generated/ beside this file)",
    )
    parser.add_argument(
        "--proto",
        default=DEFAULT_PROTO_ROOT,
        help="the proto root holding claimd/v1/claims.proto (default: the repository's proto/)",
    )
    args = parser.parse_args(argv)
    try:
        generate(args.out, args.proto)
    except (OSError, RuntimeError) as error:
        print(f"gen_stubs: {error}", file=sys.stderr)
        return 1
    print(f"stubs for claimd.v1 written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
