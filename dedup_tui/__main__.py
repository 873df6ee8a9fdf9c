from dedup_tui.cli import run

run()
