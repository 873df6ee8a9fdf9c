"""Command palette: the current screen's actions, titled "noun: verb"."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class ActionCommands(Provider):
    def _commands(self):
        screen = self.screen
        seen = set()
        for act in getattr(screen, "ACTIONS", []):
            if act.title in seen or act.action.startswith("app.command_palette"):
                continue
            seen.add(act.title)
            name = act.action.split("(")[0].removeprefix("app.")
            target = self.app if act.action.startswith("app.") else screen
            if target is screen and screen.check_action(name, ()) is not True:
                continue
            if getattr(self.app, "refuses", None) is not None and self.app.refuses(act.action, screen):
                continue  # a read-only window
            keys = self.app.keymap.display(act) if hasattr(self.app, "keymap") else act.display  # as remapped
            yield act.title, partial(screen.run_action, act.action), f"key: {keys}"

    async def discover(self) -> Hits:
        for title, callback, help_text in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
