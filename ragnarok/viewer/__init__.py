"""``ragnarok view``: runs rendered for people, in the terminal or as one self-contained HTML page."""
