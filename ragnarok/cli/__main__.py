"""``python -m ragnarok.cli``: the ``ragnarok`` command, for a checkout that was never installed."""

import sys

from ragnarok.cli.main import main

sys.exit(main())
