"""A Footer that rebuilds its keys only when what it shows changes.

Textual's Footer recomposes (removes and re-creates every FooterKey, each one restyled) on every
`bindings_updated` signal: focus changes, screen pushes and each `refresh_bindings()` call, often
several per user action. Here the signals are coalesced into one check after the next refresh,
and the keys are rebuilt only when the shown bindings (key, description, enabled) differ from
the ones on screen.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer, Label


class AppFooter(Footer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._shown: tuple | None = None
        self._pending = False
        self._composed_once = False

    COMPACT_BELOW = 120  # columns: narrower terminals get the compact footer, so every key fits at 80

    def on_resize(self) -> None:
        self.compact = self.app.size.width < self.COMPACT_BELOW
        if self.is_attached and self._composed_once:
            self.call_after_refresh(self._recompose_if_changed)

    def key_width(self, key_display: str, description: str) -> int:
        """The cells a key takes in the footer: its spaces (around the key and after the
        description, or a margin when compact) and its text."""
        return len(key_display) + len(description) + (2 if self.compact else 3)

    READ_ONLY = " READ-ONLY "

    def _refused(self, action: str) -> bool:
        """A key a read-only window refuses: not offered in its footer."""
        refuses = getattr(self.app, "refuses", None)
        return refuses is not None and refuses(action, self.screen)

    def compose(self) -> ComposeResult:
        """Footer's keys, those that would run past the right edge (or under the palette entry)
        hidden: the footer ends with a whole key, never a cut one (every key is in the help).
        A read-only window starts it with READ-ONLY and leaves out the keys it refuses."""
        room = self.app.size.width - (len("^p palette") + 3 if self.show_command_palette else 0)
        used = 0
        if getattr(self.app, "read_only", None) is not None:
            used = len(self.READ_ONLY) + 1
            yield Label(self.READ_ONLY, id="read-only-mark")
        for widget in super().compose():
            is_key = hasattr(widget, "key_display") and hasattr(widget, "description")  # a FooterKey
            if is_key and not widget.has_class("-command-palette"):
                if self._refused(widget.action):
                    widget.display = False
                    yield widget
                    continue
                used += self.key_width(widget.key_display, widget.description)
                if used > room:
                    widget.display = False
            yield widget

    def palette_fits(self, shown) -> bool:
        """Whether '^p palette', docked at the right, leaves every key beside it whole (it is
        drawn over the last keys otherwise; ctrl+p and the help still name it)."""
        keys = sum(
            self.key_width(self.app.get_key_display(b), b.description)
            for b in {entry[1].action: entry[1] for entry in shown}.values()
            if not self._refused(b.action)
        )
        if getattr(self.app, "read_only", None) is not None:
            keys += len(self.READ_ONLY) + 1
        return keys + len("^p palette") + 3 <= self.app.size.width

    def _signature(self) -> tuple:
        active = self.screen.active_bindings
        shown_bindings = [entry for entry in active.values() if entry[1].show]
        shown = tuple(
            (binding.key, binding.action, binding.description, binding.key_display, binding.group, enabled, tooltip)
            for (_node, binding, enabled, tooltip) in shown_bindings
        )
        self.set_reactive(AppFooter.show_command_palette, self.palette_fits(shown_bindings))
        palette = None
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            entry = active.get(self.app.COMMAND_PALETTE_BINDING)
            palette = None if entry is None else (entry[1].key, entry[1].description, entry[2])
        return shown, palette, self.compact, self.show_command_palette

    def bindings_changed(self, screen) -> None:
        if not self._composed_once:  # Footer's own first composition (it shows nothing before)
            self._composed_once = True
            super().bindings_changed(screen)
            return
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen and not self._pending:
            self._pending = True
            self.call_after_refresh(self._recompose_if_changed)

    async def _recompose_if_changed(self) -> None:
        self._pending = False
        if not self.is_attached:
            return
        signature = self._signature()
        if signature == self._shown:
            return
        self._shown = signature
        await self.recompose()
