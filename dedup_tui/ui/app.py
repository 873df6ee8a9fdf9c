"""The review app. Build it with `create_app` (the CLI, the tests and the screenshot script do)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

from textual import events
from textual.app import App
from textual.notifications import Notification, Notify

from ..engine.compile import kernel_cache, warmup
from ..engine.curate.decisions import default_author
from ..engine.opening import OpenSpec
from ..engine.ray.partial import partial_view
from ..engine.store import AppLock, Project, ProjectLocked, acquire_app_lock
from . import readonly
from .commands import ActionCommands
from .keymap import Keymap, load_keymap
from .screens.help import HelpScreen
from .screens.main import MainScreen
from .shown_log import ShownLog
from .state import ReviewSession
from .text import literal, literal_line
from .writer import ProjectWriter


class DedupApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "dedup-tui"
    COMMANDS = App.COMMANDS | {ActionCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, spec: OpenSpec, author: str | None = None, read_only: bool | str = False) -> None:
        """read_only: True, a read-only window (it saves nothing); "if-open", a read-only window
        only when another dedup-tui window has the project open (`dedup-tui serve`: a second
        browser); False, refuse then."""
        # One window per project: raises ProjectLocked (a one-line message) when another
        # dedup-tui window has it open, or a load/scan command is writing it.
        self.read_only: str | None = None  # why this window may not change the project (None: it may)
        self.read_only_holder: str | None = None  # the window that has it open ("another dedup-tui window (pid ...)")
        self.project_lock: AppLock | None = None
        if read_only is True:
            self.read_only = readonly.describe(spec.db, None)
        else:
            try:
                self.project_lock = acquire_app_lock(spec.db)
            except ProjectLocked as exc:
                if read_only != "if-open" or spec.corpus:
                    raise
                self.read_only_holder = exc.holder or "another dedup-tui window"
                self.read_only = readonly.describe(spec.db, self.read_only_holder)
        try:
            super().__init__()
            self.spec = spec
            self.told: list[str] = []  # the notifications shown, newest last
            self.last_key = 0.0  # time.monotonic() of the last key pressed (work ahead waits for a pause)
            self._on_key: set[threading.Event] = set()  # set at the next key (work ahead gives way)
            self._on_key_lock = threading.Lock()
            self._replaceable: dict[str, Notification] = {}  # notify(replaces=KIND): the one shown of each kind
            self.keymap = Keymap()  # the user's keymap as checked (loaded on mount)
            self.session = ReviewSession(spec)
            self.writer = ProjectWriter(self, spec.db, read_only=self.read_only)
            self.shown_log = ShownLog(self)  # the documents shown, stored for the cluster table
            self.session.shown.record = self.shown_log.record
            self.author = author or default_author()
            self.sub_title = literal_line(spec.db.name)
            with Project(spec.db) as project:
                self.state_message = project.state_message()
                # an imported cluster scan: its screens say so, and export and rescan are the cluster's
                self.partial = partial_view(project)
            self.partial_message = self.partial.describe() if self.partial else None
            if self.partial:
                self.sub_title = literal_line(
                    f"{spec.db.name} · partial view of {self.partial.corpus_documents:,} documents"
                )
            if self.read_only is not None:
                self.title = "dedup-tui (read-only)"
                self.sub_title = literal_line(f"{spec.db.name} · read-only view")
        except BaseException:
            if self.project_lock is not None:
                self.project_lock.release()
            raise

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            self.last_key = time.monotonic()
            with self._on_key_lock:
                for waiting in self._on_key:
                    waiting.set()
            if event.is_forwarded:  # back from the focused widget: its bindings run now
                with self.session.intake.key(event.time):  # what the key's action saw on screen
                    await super().on_event(event)
                return
        await super().on_event(event)

    @contextlib.contextmanager
    def interrupted_by_keys(self):
        """(Any thread) An Event set as soon as a key is pressed, while the block runs: work done
        ahead of the reviewer (Control(cancel=event)) stops for the key's own work."""
        event = threading.Event()
        with self._on_key_lock:
            self._on_key.add(event)
        try:
            yield event
        finally:
            with self._on_key_lock:
                self._on_key.discard(event)

    def on_mount(self) -> None:
        # First run after an install: the compiled kernels are prepared in the background
        # while the reviewer works (the first LSH scan then starts warm).
        if os.environ.get("DEDUP_TUI_APP_WARMUP", "1") != "0":
            threading.Thread(target=warmup.start, name="dedup-tui-warmup-start", daemon=True).start()
        # the user's keymap, checked: what is valid applied, every entry ignored said why
        self.keymap = load_keymap()
        if self.keymap.keys:
            self.set_keymap(self.keymap.keys)
        if self.keymap.report():
            self.notify(self.keymap.report(), title="Keymap", severity="warning", timeout=20, markup=False)
        if self.read_only is not None:
            self.notify(self.read_only, title="Read-only view", severity="warning", timeout=30, markup=False)
        for said in kernel_cache.listen(self._engine_notice):  # (e.g. a cache folder refused)
            self._engine_notice(said)
        if self.spec.notice:
            notice = self.spec.notice.removeprefix("dedup-tui: ").removeprefix("first run: ")  # (the title says it)
            self.notify(notice[:1].upper() + notice[1:], title="First run", timeout=20, markup=False)
        if self.spec.warning:
            self.notify(self.spec.warning, title="Corpus changed", severity="warning", timeout=20, markup=False)
        if self.state_message:
            self.notify(self.state_message, title="Scan incomplete", severity="warning", timeout=15, markup=False)
        if self.partial_message:
            self.notify(self.partial_message, title="Imported from a cluster scan", timeout=12, markup=False)

    def _engine_notice(self, message: str) -> None:
        """A fallback the engine said once on stderr (which the app hides), as a warning; from
        any thread (notify posts a message)."""
        self.notify(message[:1].upper() + message[1:], severity="warning", timeout=20, markup=False)

    def on_unmount(self) -> None:
        kernel_cache.stop_listening(self._engine_notice)
        try:
            self.shown_log.flush()
            self.writer.close()  # every decision asked for is written before the lock goes
            if self.session.project is not None:
                self.session.project.close()  # the screens' connection (the writer has its own)
            self._remove_if_nothing_loaded()
        finally:
            if self.project_lock is not None:
                self.project_lock.release()

    def _remove_if_nothing_loaded(self) -> None:
        """A project made for this opening whose load failed or was cancelled is not left behind."""
        if not self.spec.created or self.read_only is not None:
            return
        with Project(self.spec.db) as project:
            empty = not project.has_documents()
        if empty:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(str(self.spec.db) + suffix).unlink(missing_ok=True)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity="information",
        timeout: float | None = None,
        markup: bool = True,
        replaces: str | None = None,
    ) -> None:
        """Every notification (ids, notes and error messages come from the corpus) shown inert.
        What was said stays in `told` (newest last): the tests and a driving script read it.
        `replaces`: a kind of notification shown one at a time, the newest taking the place of the
        one before (a reviewer deciding a key a second stacked three "Saved: remove …" toasts over
        the document being judged at 80x24)."""
        self.told.append(str(message))
        del self.told[:-200]
        if replaces is None:
            super().notify(
                literal(str(message)), title=literal_line(title), severity=severity, timeout=timeout, markup=markup
            )
            return
        before = self._replaceable.get(replaces)
        if before is not None:
            before.timeout = 0  # expired: gone from the screen when the new one is added
        shown = Notification(
            literal(str(message)),
            literal_line(title),
            severity,
            self.NOTIFICATION_TIMEOUT if timeout is None else timeout,
            markup=markup,
        )
        self._replaceable[replaces] = shown
        self.post_message(Notify(shown))

    async def run_action(self, action, default_namespace=None, namespaces=None) -> bool:
        """Every action (a key, a footer click, the command palette) passes here: a read-only
        window refuses, with a message, each one that would change the project."""
        if self.read_only is not None:
            target, name = readonly.target_of(self, action, default_namespace, namespaces)
            change = readonly.refused_change(target, name)
            if change is not None:
                self.notify(
                    readonly.refusal_message(change, self.spec.db, self.read_only_holder),
                    severity="warning",
                    timeout=6,
                    markup=False,
                )
                return True  # handled: the key goes nowhere else
        return await super().run_action(action, default_namespace, namespaces)

    def refuses(self, action: str, default_namespace=None) -> bool:
        """Whether this window refuses `action` (as a binding names it, e.g. "keep", "app.help"),
        run from `default_namespace` (a screen): the footer and the palette leave it out."""
        if self.read_only is None:
            return False
        target, name = readonly.target_of(self, action, default_namespace, None)
        return readonly.refused_change(target, name) is not None

    def get_key_display(self, binding) -> str:
        """A key as the footer shows it, inert like every other string on screen."""
        return literal_line(super().get_key_display(binding))

    def get_default_screen(self) -> MainScreen:
        return MainScreen(self.spec, self.session)

    @property
    def main(self) -> MainScreen:
        return self.screen_stack[0]  # type: ignore[return-value]

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())


def create_app(path=None, db=None, **options) -> DedupApp:
    from ..engine.opening import prepare

    own = ("author", "read_only")
    return DedupApp(
        prepare(path, db, **{k: v for k, v in options.items() if k not in own}),
        author=options.get("author"),
        read_only=options.get("read_only", False),
    )
