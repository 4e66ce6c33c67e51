"""The claimd the suite runs against, from the environment (cargo test sets these:
tests/it/polyglot/clients_python.rs).

  CLAIMD_TARGET       host:port of a running claimd (required)
  CLAIMD_QUOTA_TARGET host:port of a claimd, anonymous and plaintext, whose anonymous tenant
                      gets one Claim, then one per thousand seconds ([tenants.default]
                      claims_per_second = 0.001, burst = 1): the quota tests (required)
  CLAIMD_API_KEY      its API key, when it has keys
  CLAIMD_CA_FILE      the CA (PEM file) of its TLS certificate: TLS instead of plaintext
  CLAIMD_CLIENT_CERT  a client certificate and its key (PEM files), for a claimd that
  CLAIMD_CLIENT_KEY   requires them (mTLS)
  CLAIMD_PROTO_DIR    the repository's proto/ (its VERSION is the package's version)
  CLAIMD_EXPECT_WHEEL 1: the package under test must be an installed wheel, not a checkout
"""

from __future__ import annotations

import os
import secrets
from typing import Any

import claimd

NAMESPACE = "py-client-tests"
#: The fingerprint every test claims with (a digest of the payload, in real use).
FINGERPRINT = b"sha256-of-the-body"


def target() -> str:
    """CLAIMD_TARGET; fails with what to set when it is missing."""
    value = os.environ.get("CLAIMD_TARGET")
    if not value:
        raise RuntimeError("set CLAIMD_TARGET to the host:port of a running claimd")
    return value


def api_key() -> str | None:
    return os.environ.get("CLAIMD_API_KEY") or None


def tls() -> claimd.TLS | None:
    """The TLS settings for CLAIMD_CA_FILE (and the client certificate), or None."""
    ca = os.environ.get("CLAIMD_CA_FILE")
    if not ca:
        return None
    cert, key = os.environ.get("CLAIMD_CLIENT_CERT"), os.environ.get("CLAIMD_CLIENT_KEY")
    return claimd.TLS(ca=ca, cert=cert or None, key=key or None)


def quota_target() -> str:
    """CLAIMD_QUOTA_TARGET; fails with what to set when it is missing."""
    value = os.environ.get("CLAIMD_QUOTA_TARGET")
    if not value:
        raise RuntimeError("set CLAIMD_QUOTA_TARGET to the host:port of a claimd whose "
                           "anonymous tenant is over its Claims quota after one Claim")
    return value


def client_kwargs(other: str | None = None) -> dict[str, Any]:
    """What `Claims(...)` and `AsyncClaims(...)` take to reach the claimd under test, or the
    claimd at `other` with its credentials (the quota claimd's: none, plaintext)."""
    if other is not None and other == os.environ.get("CLAIMD_QUOTA_TARGET"):
        return {"target": other, "api_key": None, "tls": None}
    kwargs = {"target": target(), "api_key": api_key(), "tls": tls()}
    if other is not None:
        kwargs["target"] = other
    return kwargs


def new_key(name: str) -> str:
    """A key no other test or run uses."""
    return f"{name}-{secrets.token_hex(6)}"
