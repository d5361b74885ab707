"""``ragnarok view``: runs rendered for people, in the terminal or as one self-contained HTML page.
A tool: it imports the other tools (judge, track), core and runtime."""
