"""The review app. Build it with `create_app` (the CLI, the tests and the screenshot script do)."""

from __future__ import annotations

from textual.app import App

from ..engine.decisions import default_author
from .commands import ActionCommands
from .launch import OpenSpec
from .screens.help import HelpScreen
from .screens.main import MainScreen


class DedupApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "dedup-tui"
    COMMANDS = App.COMMANDS | {ActionCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, spec: OpenSpec, author: str | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.author = author or default_author()
        self.sub_title = str(spec.db.name)

    def get_default_screen(self) -> MainScreen:
        return MainScreen(self.spec)

    @property
    def main(self) -> MainScreen:
        return self.screen_stack[0]  # type: ignore[return-value]

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())


def create_app(path=None, db=None, **options) -> DedupApp:
    from .launch import prepare

    return DedupApp(prepare(path, db, **{k: v for k, v in options.items() if k != "author"}),
                    author=options.get("author"))
