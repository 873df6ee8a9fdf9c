"""`dedup-tui serve` and `open --read-only` on the command line: what they refuse (one line, no
traceback), the address they listen on, and the command each browser runs; then a running server
probed as a page of another site or another local user would (issue 40): no token, a foreign
Origin or Host, an oversize terminal, a browser that stops reading, more browsers than the limit.
The page itself is tested in a real browser: tests/ui/test_browser.py."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shlex
import socket
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from dedup_tui.engine.ingest import load_corpus
from dedup_tui.engine.scanning.local import scan
from dedup_tui.engine.store import Project, ProjectLocked, acquire_app_lock
from dedup_tui.ui.serve import MAX_HEIGHT, MAX_WIDTH, BrowserApp, app_command, clamp_size, listen, page_url, split_host

from ..browser_session import Served
from ..conftest import NEAR_CORPUS, cli, write_jsonl


def test_serve_refuses_what_is_not_a_project(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS)
    result = cli("serve", corpus)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {corpus}: serve opens a project file (.db); make one with dedup-tui scan PROJECT CORPUS"
    ]
    result = cli("serve", tmp_path / "missing.db")
    assert result.exit_code == 1 and "no such project file" in result.output
    assert len(result.output.strip().splitlines()) == 1
    result = cli("serve")
    assert result.exit_code == 2 and "give the project: dedup-tui serve PROJECT" in result.output


def test_serve_says_when_the_port_is_taken(tmp_path):
    db = tmp_path / "p.db"
    Project(db, create=True).close()
    taken = listen("127.0.0.1", 0)
    try:
        port = taken.getsockname()[1]
        result = cli("serve", db, "--port", port)
    finally:
        taken.close()
    assert result.exit_code == 1
    assert result.output.startswith(f"error: cannot listen on 127.0.0.1:{port}: ")
    assert len(result.output.strip().splitlines()) == 1


def test_open_read_only_opens_projects_only(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS)
    result = cli("open", corpus, "--read-only")
    assert result.exit_code == 1
    assert "a read-only view opens a project file (.db)" in result.output
    assert not (tmp_path / "c.db").exists()  # nothing made for it


def test_listening_address_and_each_browsers_command(tmp_path):
    sock = listen("127.0.0.1", 0)
    try:
        host, port = sock.getsockname()[:2]
        assert host == "127.0.0.1" and port > 0
    finally:
        sock.close()
    assert page_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert page_url("::1", 8000) == "http://[::1]:8000"
    assert page_url("0.0.0.0", 8000) == f"http://{socket.getfqdn()}:8000"  # a name other machines can use
    db = tmp_path / "a project with spaces.db"
    assert shlex.split(app_command(db, read_only=False)) == [
        sys.executable,
        "-P",
        "-m",
        "dedup_tui",
        "open",
        str(db.resolve()),
        "--read-only-if-open",
    ]
    assert shlex.split(app_command(db, read_only=True))[-1] == "--read-only"


def test_the_readmes_browser_commands_parse_as_written():
    from dedup_tui.cli import main

    from ..docs_text import section

    block = section("Review in a browser").split("```")[1]  # docs/browser.md
    lines = [shlex.split(line.split("  #")[0]) for line in block.splitlines() if line.startswith("dedup-tui ")]
    assert [words[1] for words in lines] == ["serve", "serve", "serve", "open"]
    for words in lines:
        command = main.commands[words[1]]
        with command.make_context(words[1], words[2:]) as ctx:
            assert (ctx.params.get("project_path") or ctx.params.get("path")) == "project.db"


def test_the_browser_test_says_why_it_is_skipped(tmp_path, monkeypatch):
    from .. import browser_session

    monkeypatch.setattr(browser_session, "CHROMIUM", tmp_path / "no-chromium")
    reason = browser_session.missing()
    assert reason.startswith(f"no {tmp_path / 'no-chromium'}") and "apt-get install chromium chromium-driver" in reason


# -- a running server, probed as another site's page or another local user would -------------

TOKEN = "a-test-token-of-32-characters-ok"
EVIL = "http://evil.example"


@pytest.fixture
def project(tmp_path):
    db = tmp_path / "served.db"
    p = Project(db, create=True)
    try:
        load_corpus(p, [write_jsonl(tmp_path / "c.jsonl", NEAR_CORPUS)])
        scan(p)
    finally:
        p.close()
    return db


@pytest.fixture
def served(project):
    server = Served(project, "--token", TOKEN, "--max-sessions", "2")
    try:
        yield server
    finally:
        left = server.stop()
    assert left == [], f"processes of the server left running: {left}"


def apps(served: Served) -> list[int]:
    """The pids of the apps the server runs (one per browser session)."""
    return [pid for pid, _pgid, args in served.group() if " -m dedup_tui open " in args]


def wait_until(test, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = test()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


def base(served: Served) -> str:
    return served.url.split("/?", 1)[0]


def ws_url(served: Served, path: str = f"/ws/{TOKEN}", **size) -> str:
    query = "&".join(f"{k}={v}" for k, v in size.items())
    return base(served).replace("http:", "ws:") + path + (f"?{query}" if query else "")


async def handshake(url: str, headers: dict | None = None) -> int:
    """The status a websocket handshake gets (101: accepted; closed at once after)."""
    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(url, headers=headers or {}) as ws:
                await ws.close()
                return 101
        except aiohttp.WSServerHandshakeError as refused:
            return refused.status


async def app_output(url: str, origin: str, until, timeout: float = 60.0, send=(), sent_when=None) -> bytes:
    """The app's bytes a websocket receives, until `until(bytes)` holds. `send`: messages sent
    once `sent_when(bytes)` holds; the bytes returned are then only those received after."""
    got = b""
    waiting = sent_when is not None
    async with aiohttp.ClientSession() as session, session.ws_connect(url, headers={"Origin": origin}) as ws:
        async with asyncio.timeout(timeout):
            async for message in ws:
                if message.type == aiohttp.WSMsgType.BINARY:
                    got += message.data
                    if waiting and sent_when(got):
                        for item in send:
                            await ws.send_str(json.dumps(item))
                        got, waiting = b"", False
                    elif not waiting and until(got):
                        return got
    raise AssertionError(f"the websocket closed after {len(got)} bytes")


def get(url: str, headers: dict | None = None, cookies: dict | None = None) -> tuple[int, str, dict]:
    async def fetch():
        async with (
            aiohttp.ClientSession(cookies=cookies) as session,
            session.get(url, headers=headers or {}, allow_redirects=False) as response,
        ):
            return response.status, await response.text(), dict(response.headers)

    return asyncio.run(fetch())


def test_the_printed_url_gets_the_page_a_cookie_and_the_app(served):
    assert re.fullmatch(rf"http://127\.0\.0\.1:\d+/\?token={TOKEN}", served.url)
    status, page, headers = get(served.url)
    assert status == 200
    cookie = headers["Set-Cookie"]
    name = f"dedup-tui-token-{urlsplit(served.url).port}"
    assert cookie.startswith(f"{name}={TOKEN};") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Path=/" in cookie
    assert headers["Referrer-Policy"] == "no-referrer"
    websocket = re.search(r'data-session-websocket-url="([^"]+)"', page).group(1)
    assert websocket == ws_url(served)
    assert "history.replaceState" in page  # the token leaves the address bar
    # the cookie alone opens the page and its websocket (what the browser sends afterwards)
    status, page, _ = get(base(served) + "/", cookies={name: TOKEN})
    assert status == 200 and "data-session-websocket-url" in page
    origin = base(served)
    got = asyncio.run(app_output(websocket, origin, lambda b: b"THRESHOLD" in b))
    assert b"THRESHOLD" in got  # the app's screen


def test_a_page_without_the_token_gets_nothing(served):
    for url in (
        base(served) + "/",
        base(served) + "/?token=" + TOKEN[:-1] + "x",
        base(served) + "/static/js/textual.js",
        base(served) + "/download/anything",
    ):
        status, page, headers = get(url)
        assert status == 401, url
        assert "data-session-websocket-url" not in page and "Set-Cookie" not in headers
    status, _, _ = get(base(served) + "/", cookies={f"dedup-tui-token-{urlsplit(served.url).port}": "wrong" * 7})
    assert status == 401
    assert apps(served) == []


def test_a_websocket_without_the_token_is_refused(served):
    origin = base(served)
    for url in (ws_url(served, "/ws"), ws_url(served, "/ws/" + "x" * len(TOKEN)), ws_url(served, "/ws/")):
        assert asyncio.run(handshake(url, {"Origin": origin})) in (401, 404), url
        assert asyncio.run(handshake(url, {"Origin": EVIL})) in (401, 404), url
    assert asyncio.run(handshake(ws_url(served, "/ws"), {"Origin": origin})) == 401
    assert apps(served) == []  # no app was started for any of them


def test_a_websocket_from_a_foreign_origin_is_refused(served):
    name = f"dedup-tui-token-{urlsplit(served.url).port}"
    port = urlsplit(served.url).port
    for origin in (
        EVIL,
        f"http://evil.example:{port}",
        "null",
        f"https://127.0.0.1:{port}",
        f"http://127.0.0.1:{port + 1}",
        f"http://localhost:{port}",
    ):
        assert asyncio.run(handshake(ws_url(served), {"Origin": origin})) == 403, origin
        assert asyncio.run(handshake(ws_url(served, "/ws"), {"Origin": origin, "Cookie": f"{name}={TOKEN}"})) == 403
    assert apps(served) == []
    # the page's own origin: accepted (and a client that is no browser sends none: the token decides)
    assert asyncio.run(handshake(ws_url(served), {"Origin": base(served)})) == 101
    assert asyncio.run(handshake(ws_url(served))) == 101


def test_a_foreign_host_is_refused_even_with_the_token(served, project):
    port = urlsplit(served.url).port
    for host in (f"evil.example:{port}", "evil.example", f"localhost.evil.example:{port}", "", "[::1"):
        status, page, headers = get(served.url, headers={"Host": host})
        assert status == 403, host
        assert "data-session-websocket-url" not in page and "Set-Cookie" not in headers
        assert asyncio.run(handshake(ws_url(served), {"Host": host, "Origin": f"http://{host}"})) == 403
    assert apps(served) == []
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost:9000"):  # loopback names, any port (a tunnel)
        assert get(served.url, headers={"Host": host})[0] == 200, host
    # --allow-host adds a name, and the page then links and connects on it
    with Served(project, "--token", TOKEN, "--allow-host", "review.example") as other:
        status, page, _ = get(other.url, headers={"Host": f"review.example:{urlsplit(other.url).port}"})
        assert status == 200 and f"ws://review.example:{urlsplit(other.url).port}/ws/{TOKEN}" in page
        assert get(other.url, headers={"Host": "evil.example"})[0] == 403


def test_behind_a_tls_proxy_the_public_urls_host_and_origin_are_allowed(project):
    free = listen("127.0.0.1", 0)
    port = free.getsockname()[1]
    free.close()
    with Served(
        project, "--token", TOKEN, "--port", str(port), "--public-url", "https://review.example.org/"
    ) as proxied:
        assert proxied.url == f"https://review.example.org/?token={TOKEN}"
        # as the proxy forwards it: Host review.example.org, to the port listened on
        status, page, headers = get(f"http://127.0.0.1:{port}/?token={TOKEN}", headers={"Host": "review.example.org"})
        assert status == 200 and f'data-session-websocket-url="wss://review.example.org/ws/{TOKEN}"' in page
        assert "Secure" in headers["Set-Cookie"]
        ws = f"ws://127.0.0.1:{port}/ws/{TOKEN}"
        assert asyncio.run(handshake(ws, {"Host": "review.example.org", "Origin": "https://review.example.org"})) == 101
        for origin in ("https://review.example.org:8443", "https://evil.example", EVIL):
            assert asyncio.run(handshake(ws, {"Host": "review.example.org", "Origin": origin})) == 403, origin


def app_environ(served: Served, url: str, origin: str) -> dict[str, str]:
    """The environment of the app a websocket to `url` gets (read while it runs)."""

    async def probe() -> dict[str, str]:
        async with aiohttp.ClientSession() as session, session.ws_connect(url, headers={"Origin": origin}) as ws:
            await ws.receive(timeout=60)  # the first screen: the app runs
            (pid,) = apps(served)
            return dict(
                item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in item
            )

    return asyncio.run(probe())


def test_an_oversize_terminal_is_clamped(served):
    environ = app_environ(served, ws_url(served, width=10000, height=10000), base(served))
    assert (environ["COLUMNS"], environ["ROWS"]) == (str(MAX_WIDTH), str(MAX_HEIGHT))  # the app's terminal
    wait_until(lambda: apps(served) == [], 30, "the app ended with its session")
    # a resize message, once the app runs at 80x24: the app draws at most 500x200
    moves = re.compile(rb"\x1b\[(\d+);(\d+)H")
    got = asyncio.run(
        app_output(
            ws_url(served, width=80, height=24),
            base(served),
            lambda b: any(int(row) == MAX_HEIGHT for row, _ in moves.findall(b)),
            send=[["resize", {"width": 10000, "height": 10000}]],
            sent_when=lambda b: b"THRESHOLD" in b and b"clusters:" in b,
        )
    )
    rows = [int(row) for row, _ in moves.findall(got)]
    assert max(rows) == MAX_HEIGHT
    text = got.decode("utf-8", "replace")
    widths = [len(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|[\r\n]", "", line)) for line in re.split(r"\x1b\[\d+;\d+H", text)]
    assert 80 < max(widths) <= MAX_WIDTH


def test_sizes_that_are_not_numbers_or_too_big():
    assert clamp_size("10000", "10000") == (MAX_WIDTH, MAX_HEIGHT)
    assert clamp_size(10**30, -5) == (80, 1)
    assert clamp_size(float("nan"), "x") == (80, 24)
    assert clamp_size(None, True) == (80, 24)
    assert clamp_size(120.7, "50") == (120, 50)
    assert split_host("[::1]:8000") == ("::1", 8000) and split_host("LocalHost") == ("localhost", None)
    assert split_host("a:b") is None and split_host("[::1]x") is None and split_host("") is None


def raw_websocket(url: str, origin: str) -> socket.socket:
    """A websocket opened by hand on a socket with a tiny receive buffer, then never read: no
    pong, no frame taken."""
    parts = urlsplit(url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((parts.hostname, parts.port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET {parts.path}?{parts.query} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Origin: {origin}\r\n\r\n"
        ).encode()
    )
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += sock.recv(1)
    assert reply.startswith(b"HTTP/1.1 101"), reply
    return sock


def send_text(sock: socket.socket, text: str) -> None:
    """One websocket text frame, masked as a client's must be."""
    payload, mask = text.encode(), os.urandom(4)
    assert len(payload) < 126
    sock.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def lock_holder(db: Path) -> int | None:
    """The pid holding the project's app lock (None: nobody)."""
    try:
        acquire_app_lock(db).release()
        return None
    except ProjectLocked:
        return json.loads(Path(f"{db}.lock").read_text())["pid"]


def stop_reading(served: Served, project: Path, seconds: float) -> tuple[socket.socket, int]:
    """A browser that takes its app's screen, then stops reading while it asks for a whole new
    screen every 0.1 s for `seconds` (or until the server cuts it off); its app's pid."""
    silent = raw_websocket(ws_url(served, width=MAX_WIDTH, height=MAX_HEIGHT), base(served))
    (pid,) = wait_until(lambda: apps(served), 60, "an app for the browser")
    wait_until(lambda: lock_holder(project) == pid, 60, "the browser's app holds the lock")
    deadline = time.monotonic() + seconds
    try:
        for n in range(10**6):
            if time.monotonic() > deadline or pid not in apps(served):
                break
            send_text(silent, json.dumps(["resize", {"width": MAX_WIDTH - n % 2, "height": MAX_HEIGHT - n % 2}]))
            time.sleep(0.1)
    except ConnectionError:  # cut off by the server
        pass
    return silent, pid


def the_next_browser_reviews(served: Served, project: Path) -> None:
    """A new browser's app, not a read-only one, holds the project's lock."""

    async def session() -> tuple[bytes, list[int], int | None]:
        async with (
            aiohttp.ClientSession() as client,
            client.ws_connect(ws_url(served), headers={"Origin": base(served)}) as ws,
        ):
            got = b""
            while b"THRESHOLD" not in got:
                got += (await ws.receive(timeout=60)).data
            return got, apps(served), lock_holder(project)

    got, running, holder = asyncio.run(session())
    assert len(running) == 1 and holder == running[0]
    assert b"READ-ONLY" not in got


def test_a_browser_that_stops_reading_has_its_app_ended_and_the_lock_released(served, project):
    started = time.monotonic()
    silent, pid = stop_reading(served, project, seconds=30)  # connected all along
    try:
        wait_until(lambda: pid not in apps(served), 30, "the app of the browser that stopped reading ended")
        ended = time.monotonic() - started
        assert lock_holder(project) is None
    finally:
        silent.close()
    assert ended < 20, ended  # its writes wait at most 5 s, its app at most 5 s more
    the_next_browser_reviews(served, project)


def test_a_browser_that_stops_reading_then_vanishes_has_its_app_ended(served, project):
    silent, pid = stop_reading(served, project, seconds=2)
    silent.close()  # with data unread: the connection is reset
    started = time.monotonic()
    wait_until(lambda: pid not in apps(served), 30, "the app of the browser that vanished ended")
    ended = time.monotonic() - started
    assert lock_holder(project) is None and ended < 12, ended
    the_next_browser_reviews(served, project)


def test_more_browsers_than_the_limit_are_told_why(served):
    async def three() -> tuple[list[bytes], int, str, tuple[int, str]]:
        origin = base(served)
        async with aiohttp.ClientSession() as session:
            first = await session.ws_connect(ws_url(served), headers={"Origin": origin})
            second = await session.ws_connect(ws_url(served), headers={"Origin": origin})
            screens = []
            for ws in (first, second):
                message = await ws.receive(timeout=60)
                screens.append(message.data)
            async with session.get(served.url) as page:
                status, text = page.status, await page.text()
            third = await session.ws_connect(ws_url(served), headers={"Origin": origin})
            message = await third.receive(timeout=30)
            refused = (message.type, third.close_code, message.extra)
            running = len(apps(served))
            await first.close()
            await second.close()
            return screens, running, (status, text), refused

    screens, running, (status, text), refused = asyncio.run(three())
    assert all(screens) and running == 2
    assert status == 503 and "--max-sessions 2" in text and "Close a tab" in text
    kind, code, reason = refused
    assert kind == aiohttp.WSMsgType.CLOSE and code == 1013
    assert reason == "this server runs at most 2 sessions (--max-sessions 2)"
    wait_until(lambda: apps(served) == [], 30, "the two apps ended with their sessions")
    assert get(served.url)[0] == 200  # room again


def test_an_app_is_ended_even_when_textual_serves_stop_fails(monkeypatch):
    from textual_serve.app_service import AppService
    from textual_serve.download_manager import DownloadManager

    async def lost(self):
        raise ConnectionError("Connection lost")

    async def run() -> int | None:
        app = BrowserApp(
            f"{sys.executable} -c 'import time; time.sleep(60)'",
            write_bytes=None,
            write_str=None,
            close=None,
            download_manager=DownloadManager(),
        )
        app.quit_timeout = 0.5
        await app.start(80, 24)
        monkeypatch.setattr(AppService, "stop", lost)
        await app.stop()
        return app._process.returncode

    assert asyncio.run(run()) == -9  # killed: it ignores the quit it never got


def test_serve_refuses_a_short_token_and_warns_beyond_loopback(project, monkeypatch):
    result = cli("serve", project, "--token", "short")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "must be 16 to 256 letters" in result.output
    monkeypatch.setenv("DEDUP_TUI_TOKEN", "has spaces in it, not url safe")
    assert cli("serve", project).exit_code == 2
    monkeypatch.delenv("DEDUP_TUI_TOKEN")
    result = cli("serve", project, "--token", TOKEN, "--public-url", "ftp://x")
    assert result.exit_code == 2 and "--public-url 'ftp://x'" in result.output
    env = dict(os.environ, DEDUP_TUI_TOKEN=TOKEN)
    with Served(project, "--host", "0.0.0.0", env=env) as wide:
        assert wide.url.endswith(f"/?token={TOKEN}")
        local = f"http://127.0.0.1:{urlsplit(wide.url).port}"
        environ = app_environ(wide, f"{local.replace('http:', 'ws:')}/ws/{TOKEN}", local)
        assert "COLUMNS" in environ and "DEDUP_TUI_TOKEN" not in environ  # the app has no use for it
        wait_until(lambda: wide.output or None, 5, "output")
    said = "".join(wide.output)
    assert "warning: listening on 0.0.0.0, beyond this machine: the token is the only protection" in said
    assert "not encrypted" in said
    with Served(project) as local:  # a new random token each start, and no warning on loopback
        token = urlsplit(local.url).query.removeprefix("token=")
        assert len(token) >= 40 and token != TOKEN
    assert "warning" not in "".join(local.output)
