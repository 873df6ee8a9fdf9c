"""`dedup-tui serve PROJECT`: the review app in a web page, with textual-serve.

textual-serve runs a command for each browser that connects (its own process, its screen sent
to the page's terminal over a websocket). Ours is `dedup-tui open PROJECT --read-only-if-open`:
the first browser takes the project's app lock and reviews; while it has the project open, every
other browser gets a read-only view that says so (readonly.py).

The server listens on a socket bound here, so `--port 0` works (a free port, printed) and the
address printed is the one the page's websocket uses.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import signal
import socket
import sys
from pathlib import Path

from aiohttp import WSCloseCode, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

log = logging.getLogger("textual-serve")


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: a free one)."""
    family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def page_url(host: str, port: int) -> str:
    """The address a browser opens: this machine's name when listening on every address."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.getfqdn()
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return f"http://{host}:{port}"


def app_command(db: Path, read_only: bool) -> str:
    """The command textual-serve runs for each browser: this Python and this dedup-tui (-P: never
    a dedup_tui folder that happens to be in the server's working folder)."""
    mode = "--read-only" if read_only else "--read-only-if-open"
    return shlex.join([sys.executable, "-P", "-m", "dedup_tui", "open", str(db.resolve()), mode])


class BrowserApp(AppService):
    """One browser's app process. stop() also waits for the process to end (textual-serve's
    returns once the app closed its output), so none outlives the server."""

    async def stop(self) -> None:
        await super().stop()
        process = self._process
        if process is not None and process.returncode is None:
            try:
                await asyncio.wait_for(process.wait(), timeout=10)
            except asyncio.TimeoutError:
                process.kill()
                await process.wait()


class ProjectServer(Server):
    """textual-serve's Server on a socket bound beforehand, announcing itself in one line, and
    closing every browser's session (its app quits) when it stops."""

    def __init__(self, db: Path, sock: socket.socket, public_url: str | None = None, read_only: bool = False):
        host, port = sock.getsockname()[:2]
        url = public_url or page_url(host, port)
        super().__init__(app_command(db, read_only), host=host, port=port, title=f"dedup-tui · {db.name}",
                         public_url=url)
        self.db = db
        self.sock = sock
        self.read_only = read_only
        self.sessions: set[web.WebSocketResponse] = set()

    async def on_startup(self, app: web.Application) -> None:
        others = "every browser gets a read-only view" if self.read_only else \
            "the first browser reviews, the next ones get a read-only view"
        print(f"dedup-tui: serving {self.db.name} at {self.public_url} ({others}); Ctrl+C stops", flush=True)

    async def on_shutdown(self, app: web.Application) -> None:
        """Ctrl+C: close each browser's session; its handler then quits its app and waits for it
        (aiohttp waits for the handlers before the loop ends)."""
        for websocket in list(self.sessions):
            await websocket.close(code=WSCloseCode.GOING_AWAY, message=b"the server stopped")

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """A browser's session: textual-serve's, with its websocket known to on_shutdown and an
        app that is waited for (BrowserApp)."""
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        service: BrowserApp | None = None
        self.sessions.add(websocket)
        try:
            await websocket.prepare(request)
            service = BrowserApp(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                 close=websocket.close, download_manager=self.download_manager, debug=self.debug)
            await service.start(width, height)
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception as error:  # one browser's failure is logged; the server goes on
            log.exception(error)
        finally:
            self.sessions.discard(websocket)
            if service is not None:
                await service.stop()
        return websocket

    def serve(self, debug: bool = False) -> None:
        """Serve until Ctrl+C or SIGTERM (as Server.serve does, on our socket)."""
        self.debug = debug
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.request_exit)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - not POSIX
                pass
        web.run_app(self._make_app(), sock=self.sock, handle_signals=False, loop=loop, print=lambda *args: None,
                    access_log=None)  # one line per request is noise here


def serve_project(db: Path, host: str = "127.0.0.1", port: int = 8000, public_url: str | None = None,
                  read_only: bool = False) -> None:
    sock = listen(host, port)
    ProjectServer(db, sock, public_url=public_url, read_only=read_only).serve()
