from dedup_tui.cli import main

main()
