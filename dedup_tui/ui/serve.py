"""`dedup-tui serve PROJECT`: the review app in a web page, with textual-serve.

textual-serve runs a command for each browser that connects (its own process, its screen sent
to the page's terminal over a websocket). Ours is `dedup-tui open PROJECT --read-only-if-open`:
the first browser takes the project's app lock and reviews; while it has the project open, every
other browser gets a read-only view that says so (readonly.py).

Nobody gets in without the URL, as with a local notebook server:
- every request needs the server's token: `?token=` in the URL (a page loaded so sets an
  HttpOnly, SameSite=Strict cookie that the page's later requests carry), or that cookie;
- every request's Host must be a name this server answers to (loopback names, the address it
  listens on, --public-url's host, --allow-host names), which defeats DNS rebinding;
- a websocket's Origin must be the page's own origin (or --public-url's);
- at most `max_sessions` apps run at once, each terminal at most MAX_WIDTH x MAX_HEIGHT, and a
  browser that stops reading has its app ended within seconds (a bounded send, a 5 s heartbeat).

The server listens on a socket bound here, so `--port 0` works (a free port, printed) and the
address printed is the one the page's websocket uses.
"""

from __future__ import annotations

import asyncio
import hmac
import html
import ipaddress
import json
import logging
import re
import secrets
import shlex
import signal
import socket
import sys
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import WSCloseCode, WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

log = logging.getLogger("textual-serve")

TOKEN_ENV = "DEDUP_TUI_TOKEN"
TOKEN_PATTERN = re.compile(r"[A-Za-z0-9._~-]{16,256}")
MAX_WIDTH, MAX_HEIGHT = 500, 200  # cells: more than a 4K screen shows at a readable font size
HEARTBEAT = 5.0  # seconds between pings; no pong within half of it ends the session
SEND_TIMEOUT = 5.0  # seconds a browser may take to accept a write before its session ends
QUIT_TIMEOUT = 5.0  # seconds an app has to quit once asked, before it is killed
TRY_AGAIN_LATER = 1013  # websocket close code (RFC 6455 registry): the server is at its limit
LOOPBACK_NAMES = frozenset({"localhost"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


class ServeError(ValueError):
    """A bad `serve` option (a short token, a public URL that is not one): one line for the CLI."""


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: a free one)."""
    family, kind, proto, _name, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
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
    if host in WILDCARD_HOSTS:
        host = socket.getfqdn()
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return f"http://{host}:{port}"


def app_command(db: Path, read_only: bool) -> str:
    """The command textual-serve runs for each browser: this Python and this dedup-tui (-P: never
    a dedup_tui folder that happens to be in the server's working folder)."""
    mode = "--read-only" if read_only else "--read-only-if-open"
    return shlex.join([sys.executable, "-P", "-m", "dedup_tui", "open", str(db.resolve()), mode])


def check_token(token: str | None) -> str:
    """The token to require: the one given (checked), else a new random one."""
    if token is None:
        return secrets.token_urlsafe(32)
    if not TOKEN_PATTERN.fullmatch(token):
        raise ServeError(
            f"the token (--token or {TOKEN_ENV}) must be 16 to 256 letters, digits or . _ ~ - "
            f"(a short token is easy to guess)"
        )
    return token


def check_public_url(url: str | None) -> str | None:
    """--public-url without its trailing slash, refused unless http(s)://HOST[:PORT][/PATH]."""
    if url is None:
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ServeError(f"--public-url {url!r}: give the address browsers open, http(s)://HOST[:PORT][/PATH]")
    return url.rstrip("/")


def split_host(value: str) -> tuple[str, int | None] | None:
    """("name", port or None) of a Host header or an origin's netloc; None when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        name, _, port_text = value.partition(":")
        port_text = port_text if _ else None
    if not name:
        return None
    if port_text is None:
        return name, None
    if not port_text.isascii() or not port_text.isdigit() or int(port_text) > 65535:
        return None
    return name, int(port_text)


def is_loopback(name: str) -> bool:
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def addresses(address: str) -> set[str]:
    """The ways a Host header may write a local address ("::ffff:10.0.0.5" is also "10.0.0.5")."""
    names = {address.lower()}
    try:
        mapped = ipaddress.ip_address(address.split("%", 1)[0]).ipv4_mapped
    except (ValueError, AttributeError):
        mapped = None
    if mapped is not None:
        names.add(str(mapped))
    return names


def origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a URL or an Origin header, the port filled in from the scheme."""
    try:
        parts = urlsplit(url.strip().lower())
        port = parts.port
    except ValueError:
        return None
    default = {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(parts.scheme)
    if default is None or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port or default


def refusal_page(status: int, title: str, text: str) -> web.Response:
    """A short page saying why (the body a refused browser shows)."""
    body = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>dedup-tui: {html.escape(title)}</title></head>"
        f"<body style='font-family: sans-serif; margin: 3em'><h1>{html.escape(title)}</h1>"
        f"<p>{html.escape(text)}</p></body></html>"
    )
    return web.Response(status=status, text=body, content_type="text/html")


# The page as textual-serve ships it, with two additions: no Referer leaves it (its address holds
# the token), and the token is taken out of the address bar once the cookie is set.
_PAGE_ADDITIONS = """<meta name="referrer" content="no-referrer" />
    <script>
      (function () {
        const url = new URL(window.location.href);
        if (url.searchParams.has("token")) {
          url.searchParams.delete("token");
          window.history.replaceState(null, "", url.pathname + url.search + url.hash);
        }
      })();
    </script>
  </head>"""


def _page_template(name: str) -> str | None:
    if name != "app_index.html":
        return None
    import textual_serve

    source = (Path(textual_serve.__file__).parent / "templates" / name).read_text(encoding="utf-8")
    if "</head>" not in source:  # pragma: no cover - a textual-serve whose page has no head
        raise RuntimeError("textual-serve's app_index.html has no </head>")
    return source.replace("</head>", _PAGE_ADDITIONS, 1)


class BrowserApp(AppService):
    """One browser's app process, started without a shell (so a kill reaches the app itself).
    stop() always ends the process: it asks the app to quit and waits QUIT_TIMEOUT seconds, then
    kills it, even when textual-serve's stop() fails (it raises ConnectionError('Connection lost')
    when the browser is gone) or hangs."""

    quit_timeout = QUIT_TIMEOUT

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        environment = super()._build_environment(width=width, height=height)
        environment.pop(TOKEN_ENV, None)  # the app has no use for the server's secret
        return environment

    async def _open_app_process(self, width: int = 80, height: int = 24):
        environment = self._build_environment(width=width, height=height)
        self._process = process = await asyncio.create_subprocess_exec(
            *shlex.split(self.command),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environment,
        )
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(super().stop(), timeout=self.quit_timeout)
        except Exception as error:  # noqa: BLE001 - the process is ended below all the same (TimeoutError included)
            log.debug("stopping an app: %r", error)
        finally:
            await self.end_process()

    async def end_process(self) -> None:
        """Wait for the app to exit (QUIT_TIMEOUT seconds), else kill it. Its output is read to
        the end meanwhile: asyncio waits for the pipes to close as well, and an app whose output
        nobody reads any more (its browser gone) blocks writing it."""
        process = self._process
        if process is None:
            return
        task = self._task
        if task is not None and not task.done():  # the reader of its output: ours now
            task.cancel()
            await asyncio.wait([task])
        ended = asyncio.ensure_future(self._exited(process))
        try:
            await asyncio.wait_for(asyncio.shield(ended), timeout=self.quit_timeout)
        except TimeoutError:
            log.warning("an app did not quit within %.0f s: killed", self.quit_timeout)
        finally:
            if process.returncode is None:
                try:
                    process.kill()
                except ProcessLookupError:
                    pass
            await ended

    @staticmethod
    async def _exited(process) -> None:
        async def discard(stream) -> None:
            if stream is not None:
                while await stream.read(1 << 16):
                    pass

        await asyncio.gather(discard(process.stdout), discard(process.stderr), process.wait())


class Session:
    """One browser's websocket, with writes that cannot block for ever: a browser that does not
    take a write within SEND_TIMEOUT seconds has its connection cut, which ends its session."""

    def __init__(self, websocket: web.WebSocketResponse, transport: asyncio.BaseTransport | None):
        self.websocket = websocket
        self.transport = transport
        self.cut = False

    async def _bounded(self, write) -> None:
        if self.cut:
            write.close()
            raise ConnectionResetError("the browser stopped reading")
        try:
            await asyncio.wait_for(write, timeout=SEND_TIMEOUT)
        except TimeoutError:
            self.cut_off(f"a browser took no output for {SEND_TIMEOUT:.0f} s")
            raise ConnectionResetError("the browser stopped reading") from None

    async def send_bytes(self, data: bytes) -> None:
        await self._bounded(self.websocket.send_bytes(data))

    async def send_str(self, data: str) -> None:
        await self._bounded(self.websocket.send_str(data))

    async def close(self) -> None:
        try:
            await self._bounded(self.websocket.close())
        except ConnectionError:
            pass

    def cut_off(self, why: str | None = None) -> None:
        """Drop the connection without waiting for the browser (its unread data included)."""
        if not self.cut:
            self.cut = True
            if why:
                log.info("%s: its session ends", why)
        if self.transport is not None:
            self.transport.abort()


class ProjectServer(Server):
    """textual-serve's Server on a socket bound beforehand, behind the token, Host and Origin
    checks and the limits (see the module's docstring), announcing itself in one line, and
    closing every browser's session (its app quits) when it stops."""

    def __init__(
        self,
        db: Path,
        sock: socket.socket,
        public_url: str | None = None,
        read_only: bool = False,
        token: str | None = None,
        allowed_hosts: Iterable[str] = (),
        max_sessions: int = 4,
    ):
        host, port = sock.getsockname()[:2]
        self.given_public_url = check_public_url(public_url)
        url = self.given_public_url or page_url(host, port)
        super().__init__(
            app_command(db, read_only), host=host, port=port, title=f"dedup-tui · {db.name}", public_url=url
        )
        self.db = db
        self.sock = sock
        self.read_only = read_only
        self.token = check_token(token)
        self.cookie_name = f"dedup-tui-token-{port}"  # a browser keeps one cookie per host for every port
        self.max_sessions = max_sessions
        self.sessions: set[web.WebSocketResponse] = set()
        self.host_names = self._host_names(host, allowed_hosts)

    def _host_names(self, host: str, allowed_hosts: Iterable[str]) -> frozenset[str]:
        """The names (besides loopback ones and the address a request came to) that Host may hold."""
        names = {name.strip().lower().strip("[]") for name in allowed_hosts if name.strip()}
        if host in WILDCARD_HOSTS:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        else:
            names.add(host.lower())
        if self.given_public_url:
            names.add(urlsplit(self.given_public_url).hostname)
        return frozenset(names)

    @property
    def url(self) -> str:
        """The address to open: the page with the token."""
        return f"{self.public_url}/?token={self.token}"

    def beyond_loopback(self) -> bool:
        return not is_loopback(self.host)

    # -- the checks, before any handler -------------------------------------------------------

    def host_allowed(self, request: web.Request) -> bool:
        """Is the request's Host a name this server answers to? (A page of another site that
        rebinds its own name to this address sends that name: refused.) Any port: an ssh
        tunnel or a proxy may forward another one."""
        parsed = split_host(request.headers.get("Host", ""))
        if parsed is None:
            return False
        name = parsed[0]
        if is_loopback(name) or name in self.host_names:
            return True
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        return bool(sockname) and name in addresses(sockname[0])  # the address the browser connected to

    def token_given(self, request: web.Request) -> str | None:
        """How the request proves it has the token ("query", "path", "cookie"), None if it does not."""
        for how, value in (
            ("path", request.match_info.get("token")),
            ("query", request.query.get("token")),
            ("cookie", request.cookies.get(self.cookie_name)),
        ):
            if value is not None and hmac.compare_digest(value.encode("utf-8", "replace"), self.token.encode()):
                return how
        return None

    def origin_allowed(self, request: web.Request) -> bool:
        """A websocket's Origin: the page's own (the Host it was sent to) or --public-url's.
        Without Origin (not a browser: every browser sends it on a websocket) the token decides."""
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        theirs = origin_of(origin)
        if theirs is None:  # "null" (a sandboxed frame, a file) or malformed
            return False
        if self.given_public_url and theirs == origin_of(self.given_public_url):
            return True
        return theirs == origin_of(f"http://{request.headers.get('Host', '')}")  # this server speaks http

    @web.middleware
    async def guard(self, request: web.Request, handler) -> web.StreamResponse:
        if not self.host_allowed(request):
            return refusal_page(
                403,
                "Host not allowed",
                "This server does not answer to that name. Open the address dedup-tui serve printed, "
                "or start it with --allow-host NAME.",
            )
        how = self.token_given(request)
        if how is None:
            return refusal_page(
                401, "The address needs its token", "Open the address dedup-tui serve printed: it ends with ?token=."
            )
        response = await handler(request)
        if not isinstance(response, web.WebSocketResponse):
            response.headers["Referrer-Policy"] = "no-referrer"
            response.headers["Content-Security-Policy"] = "frame-ancestors 'none'"
            response.headers["X-Content-Type-Options"] = "nosniff"
            if how == "query":
                response.headers["Cache-Control"] = "no-store"
                response.set_cookie(
                    self.cookie_name,
                    self.token,
                    path="/",
                    httponly=True,
                    samesite="Strict",
                    secure=self.public_url.startswith("https:"),
                )
        return response

    # -- the routes ---------------------------------------------------------------------------

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard])
        aiohttp_jinja2.setup(app, loader=jinja2.FunctionLoader(_page_template))
        app.add_routes(
            [
                web.get("/", self.handle_index, name="index"),
                web.get("/ws", self.handle_websocket, name="websocket"),
                web.get("/ws/{token}", self.handle_websocket, name="websocket-token"),
                web.get("/download/{key}", self.handle_download, name="download"),
                web.static("/static", self.statics_path, name="static"),
            ]
        )
        app.on_startup.append(self.on_startup)
        app.on_shutdown.append(self.on_shutdown)
        return app

    def sessions_full(self) -> str | None:
        """Why no more sessions start now (None: one may)."""
        if len(self.sessions) < self.max_sessions:
            return None
        return (
            f"{len(self.sessions)} browser sessions are open, the most this server runs at once "
            f"(dedup-tui serve --max-sessions {self.max_sessions}). Close a tab of it and reload this page."
        )

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        """The page, its links on the address the browser used (or --public-url) and its websocket
        carrying the token; a page that says why when the sessions are all taken."""
        full = self.sessions_full()
        if full:
            return refusal_page(503, "Too many browser sessions", full)
        base = self.given_public_url or f"http://{request.headers['Host']}"
        websocket_url = ("wss:" if base.startswith("https:") else "ws:") + base.split(":", 1)[1]
        context = {
            "font_size": min(max(to_int(request.query.get("fontsize", "16"), 16), 6), 64),
            "app_websocket_url": f"{websocket_url}/ws/{self.token}",
            "config": {"static": {"url": f"{base}/static/"}},
            "application": {"name": self.title},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def on_startup(self, app: web.Application) -> None:
        others = (
            "every browser gets a read-only view"
            if self.read_only
            else "the first browser reviews, the next ones get a read-only view"
        )
        print(f"dedup-tui: serving {self.db.name} at {self.url} ({others}); Ctrl+C stops", flush=True)
        if self.beyond_loopback():
            print(
                f"dedup-tui: warning: listening on {self.host}, beyond this machine: the token is the only "
                f"protection, and the traffic (token and documents) is not encrypted; put a TLS proxy in front "
                f"(docs/browser.md: Review in a browser)",
                flush=True,
            )

    async def on_shutdown(self, app: web.Application) -> None:
        """Ctrl+C: close each browser's session; its handler then quits its app and waits for it
        (aiohttp waits for the handlers before the loop ends)."""
        for websocket in list(self.sessions):
            try:
                await asyncio.wait_for(
                    websocket.close(code=WSCloseCode.GOING_AWAY, message=b"the server stopped"), timeout=SEND_TIMEOUT
                )
            except (TimeoutError, ConnectionError):
                pass

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        """A browser's session: refused (403) from a foreign Origin; closed at once, saying why,
        beyond max_sessions; else textual-serve's session, its size clamped, its writes bounded
        (Session) and its app always ended (BrowserApp)."""
        if not self.origin_allowed(request):
            return refusal_page(403, "Origin not allowed", "A websocket from a page of another site is refused.")
        full = self.sessions_full()
        if full:
            websocket = web.WebSocketResponse(timeout=SEND_TIMEOUT)
            await websocket.prepare(request)
            reason = f"this server runs at most {self.max_sessions} sessions (--max-sessions {self.max_sessions})"
            await websocket.close(code=TRY_AGAIN_LATER, message=reason.encode())
            return websocket
        websocket = web.WebSocketResponse(heartbeat=HEARTBEAT)
        width, height = clamp_size(request.query.get("width"), request.query.get("height"))
        session = Session(websocket, request.transport)
        service: BrowserApp | None = None
        self.sessions.add(websocket)
        try:
            await websocket.prepare(request)
            service = BrowserApp(
                self.command,
                write_bytes=session.send_bytes,
                write_str=session.send_str,
                close=session.close,
                download_manager=self.download_manager,
                debug=self.debug,
            )
            await service.start(width, height)
            await self.relay(session, service)
        except asyncio.CancelledError:
            session.cut_off()
        except Exception as error:  # one browser's failure is logged; the server goes on
            log.exception(error)
        finally:
            try:
                if service is not None:
                    await service.stop()
            finally:
                self.sessions.discard(websocket)
                transport = session.transport
                if transport is not None and transport.is_closing() and transport.get_write_buffer_size():
                    transport.abort()  # closed, but data the browser never read would keep it open for ever
        return websocket

    async def relay(self, session: Session, app_service: AppService) -> None:
        """The browser's messages to its app (textual-serve's _process_messages), with every
        terminal size clamped, malformed messages ignored and the replies bounded."""
        async for message in session.websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                envelope = json.loads(message.data)
            except ValueError:
                continue
            if not isinstance(envelope, list) or not envelope:
                continue
            kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
            if kind == "stdin" and isinstance(data, str):
                to_app = app_service.send_bytes(data.encode("utf-8"))
            elif kind == "resize" and isinstance(data, dict):
                to_app = app_service.set_terminal_size(*clamp_size(data.get("width"), data.get("height")))
            elif kind == "ping":
                await session.send_str(json.dumps(["pong", data]))
                continue
            elif kind in ("blur", "focus"):
                to_app = app_service.blur() if kind == "blur" else app_service.focus()
            else:
                continue
            try:  # an app that takes no input (it waits for its browser to read) ends the session
                await asyncio.wait_for(to_app, timeout=SEND_TIMEOUT)
            except TimeoutError:
                session.cut_off(f"an app took no input for {SEND_TIMEOUT:.0f} s")
                return

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
        web.run_app(
            self._make_app(), sock=self.sock, handle_signals=False, loop=loop, print=lambda *args: None, access_log=None
        )  # one line per request is noise here


def clamp_size(width, height) -> tuple[int, int]:
    """A terminal size a screen can hold: 1..MAX_WIDTH x 1..MAX_HEIGHT (80x24 when not a number)."""

    def number(value, default: int) -> int:
        if isinstance(value, bool):
            return default
        if isinstance(value, (int, float)):
            return int(value) if value == value and abs(value) < 1e9 else default  # not NaN or huge
        return to_int(value, default) if isinstance(value, str) else default

    return min(max(number(width, 80), 1), MAX_WIDTH), min(max(number(height, 24), 1), MAX_HEIGHT)


def serve_project(
    db: Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    public_url: str | None = None,
    read_only: bool = False,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
    max_sessions: int = 4,
) -> None:
    check_token(token)  # a bad option before the socket is taken
    check_public_url(public_url)
    sock = listen(host, port)
    named = () if host in WILDCARD_HOSTS else (host,)  # `--host box.lan`: browsers may use that name
    try:
        server = ProjectServer(
            db,
            sock,
            public_url=public_url,
            read_only=read_only,
            token=token,
            allowed_hosts=(*named, *allowed_hosts),
            max_sessions=max_sessions,
        )
    except BaseException:
        sock.close()
        raise
    server.serve()
