"""How the Slack example reaches claimd: a thin shim over the `claimd` package
(clients/python), which does the real work — the channel, the API key metadata, the
heartbeating `Lease`, `ClaimdError`.

This module only
- makes the package importable: the installed one (`pip install ../../clients/python`)
  or, in a checkout where it is not installed, the one in ../../clients/python/src (it
  needs only grpcio and protobuf, which requirements.txt installs);
- turns the example's flags and environment into a `claimd.Claims`.

Connection settings, from the environment (flags of receiver.py and recover.py win):
  CLAIMD_ADDR      host:port of claimd (default localhost:50051)
  CLAIMD_API_KEY   an API key (`claimd keys create`); unset: anonymous, as claimd serves
                   on loopback until the first key exists
  CLAIMD_TLS       1: TLS with the system's roots; CLAIMD_CA_FILE: TLS trusting that PEM
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT_PACKAGE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "clients", "python",
                                "src")

try:
    import claimd
except ImportError:  # not installed: use the package of this checkout
    if not os.path.isfile(os.path.join(CHECKOUT_PACKAGE, "claimd", "__init__.py")):
        raise SystemExit("the claimd package is not installed: pip install ../../clients/python")
    sys.path.insert(0, CHECKOUT_PACKAGE)
    import claimd


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags receiver.py and recover.py share for reaching claimd."""
    env = os.environ.get
    parser.add_argument("--claimd", default=env("CLAIMD_ADDR", "localhost:50051"),
                        help="claimd's host:port (env CLAIMD_ADDR)")
    parser.add_argument("--namespace", default=env("CLAIMD_NAMESPACE", "slack-events"),
                        help="the claimd namespace (env CLAIMD_NAMESPACE)")
    parser.add_argument("--lease", type=float, default=float(env("LEASE_SECONDS", "30")),
                        help="lease length in seconds, >= 1 (env LEASE_SECONDS)")


def tls_from_env() -> claimd.TLS | bool:
    """CLAIMD_CA_FILE: TLS trusting that CA; CLAIMD_TLS=1: the system's roots; else plaintext."""
    ca_file = os.environ.get("CLAIMD_CA_FILE")
    if ca_file:
        return claimd.TLS(ca=ca_file)
    return os.environ.get("CLAIMD_TLS") == "1"


def connect(args: argparse.Namespace) -> claimd.Claims:
    """A `claimd.Claims` for parsed `add_arguments` flags; the API key and TLS come from the
    environment (a flag would show the key in `ps`). The key is never logged."""
    return claimd.Claims(args.claimd, api_key=os.environ.get("CLAIMD_API_KEY"),
                         tls=tls_from_env())
