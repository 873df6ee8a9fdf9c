"""Connecting to a Ray cluster: probing an address before Ray waits on it, the auth token hint,
and ray.init within a deadline."""

from __future__ import annotations

import io
import os
import re
import socket
import threading
import warnings
from contextlib import contextmanager

from ..errors import DedupError
from .settings import require_ray
from .stages import os_reason

# -- the driver ------------------------------------------------------------------------------------

PROBE_SECONDS = 5.0
_TOKEN = "RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token"


def auth_hint() -> str:
    """What to check when a cluster answers but no session starts: Ray's token authentication
    fails as a plain connection timeout."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        return (
            f"authentication may be the cause: RAY_AUTH_MODE=token is set here; "
            f"check that the token ({_TOKEN}) is the cluster's"
        )
    return (
        f"authentication may be the cause: if the cluster uses Ray's token authentication, set RAY_AUTH_MODE=token "
        f"and its token ({_TOKEN}) where you run this command"
    )


def connect(address: str | None = None, num_cpus: int | None = None):
    """Ray, connected: to `address` (ray://host:port, host:port of the head's GCS, or 'auto'
    for the cluster this machine belongs to), else to the Ray already started in this
    process, else to a new local one. An address nothing answers at is a DedupError within
    seconds (Ray itself retries for minutes)."""
    # A failed task's error reaches the user once, as a one-line error: not again as Ray's
    # "unhandled error" log of the task's other results, never fetched.
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    ray = require_ray()
    if not ray.is_initialized():
        target = address or os.environ.get("RAY_ADDRESS") or None
        if target == "auto" and os.environ.get("RAY_ADDRESS"):  # 'auto' goes where RAY_ADDRESS says
            target = os.environ["RAY_ADDRESS"]
        answered = target is not None and probe_address(target)  # something listens there
        kwargs = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
        said = io.StringIO()
        try:
            if target:
                with _native_stderr(said):  # Ray's C++ client logs a warning a second while it retries
                    init_within(ray, CONNECT_SECONDS, address=address, **kwargs)
            else:
                with warnings.catch_warnings():  # Ray warns, then raises: the error says it
                    warnings.simplefilter("ignore")
                    ray.init(num_cpus=num_cpus, **kwargs)
        except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:  # what ray.init raises for an address
            reason = " ".join(str(exc).split())
            if re.search(r"InvalidAuthToken|Unauthenticated", said.getvalue()):
                reason += " (the cluster refused this machine's authentication token)"
            hint = f"; {auth_hint()}" if answered and isinstance(exc, (ConnectionError, TimeoutError)) else ""
            raise DedupError(f"cannot reach a Ray cluster at {target or 'this machine'}: {reason}{hint}") from None
    return ray


CONNECT_SECONDS = 60.0


def init_within(ray, seconds: float, **kwargs) -> None:
    """ray.init(**kwargs) waited for at most `seconds`, and given up at once on Ctrl-C (a
    KeyboardInterrupt here). Connecting to a cluster, Ray retries in C++ for minutes where
    a Ctrl-C is only seen when it returns (it took 30 s): so it runs in a thread of its own,
    left behind (a daemon) when given up; the command then exits."""
    outcome: dict = {}

    def run():
        try:
            with warnings.catch_warnings():  # Ray warns, then raises: the error says it
                warnings.simplefilter("ignore")
                ray.init(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="ray-connect", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"no Ray session started within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]


@contextmanager
def _native_stderr(into: io.StringIO):
    """What is written to file descriptor 2 meanwhile (also by native code), kept in `into`."""
    import sys
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            into.write(tmp.read().decode("utf-8", "replace"))


def host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of ray://host:port or host:port; None for 'auto', 'local' or no port."""
    from urllib.parse import urlsplit

    text = address.strip()
    if text in ("auto", "local") or not text:
        return None
    try:
        parts = urlsplit(text if "://" in text else f"//{text}")
        if text.startswith("ray://") and not parts.hostname:
            raise DedupError(f"{address}: names no host (ray://host:port)")
        port = parts.port or (10001 if text.startswith("ray://") else None)  # Ray client's default port
        return (parts.hostname, port) if parts.hostname and port else None
    except ValueError:  # a port that is not a number
        raise DedupError(f"{address}: not a Ray address (ray://host:port, host:port or auto)") from None


def probe_address(address: str, seconds: float = PROBE_SECONDS) -> bool:
    """A DedupError naming the address unless something accepts a connection there within
    `seconds` (ray.init retries an unreachable address for minutes); False when the address
    names no port to try ('auto')."""
    where = host_port(address)
    if where is None:
        return False
    try:
        with socket.create_connection(where, timeout=seconds) as conn:
            speaks = _speaks_grpc(conn)
    except socket.gaierror as exc:
        raise DedupError(
            f"cannot reach a Ray cluster at {address}: unknown host {where[0]} ({exc.strerror or exc})"
        ) from None
    except ConnectionRefusedError:
        raise DedupError(
            f"cannot reach a Ray cluster at {address}: connection refused (nothing listens on port "
            f"{where[1]} of {where[0]}: is the cluster started, and is this its address?)"
        ) from None
    except TimeoutError:
        raise DedupError(
            f"cannot reach a Ray cluster at {address}: no answer within {seconds:g} s (a firewall, or the wrong host?)"
        ) from None
    except OSError as exc:
        raise DedupError(f"cannot reach a Ray cluster at {address}: {os_reason(exc)}") from None
    if not speaks:
        raise DedupError(
            f"cannot reach a Ray cluster at {address}: something listens there but it is not a Ray "
            f"cluster (no gRPC answer within {seconds:g} s); give ray://HEAD:10001 (the Ray client) or "
            f"HEAD:6379 (the head's GCS)"
        )
    return True


def _speaks_grpc(conn: socket.socket) -> bool:
    """Whether the peer answers an HTTP/2 greeting as every gRPC server (Ray's GCS and client
    server) does, with a SETTINGS frame; authentication, if any, comes later. Not tried over
    TLS (RAY_USE_TLS), where the greeting is the TLS handshake."""
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true", "yes"):
        return True
    try:
        conn.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        head = b""
        while len(head) < 9:
            chunk = conn.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
    except OSError:  # a timeout, a reset
        return False
    return head[3] == 0x04  # the frame type: SETTINGS
