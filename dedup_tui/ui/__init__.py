"""The review app (Textual). Imported only when the app is launched."""

import os

# Textual paints at most one frame per 1/TEXTUAL_FPS s, and after a pause (a reviewer between two
# keys) the next frame comes one to two periods after the screen asks for it: at the default 60,
# the members and preview that follow a cursor move reached the screen 17-33 ms after they were
# ready. At 240 it is 4-8 ms (cursor down at 1M documents, key to settled screen in tmux: median
# 63-67 ms at 60, 28-41 ms at 240). Paints still happen only when something changed; the scan
# progress limits its own repaints (widgets/progress.py). Set before Textual is imported (it
# reads the variable then); a TEXTUAL_FPS the user set wins.
os.environ.setdefault("TEXTUAL_FPS", "240")
