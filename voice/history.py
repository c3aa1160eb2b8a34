"""``python -m voice.history list|show ID|export ID``: the stored conversations (see ``voice/app/history_cli.py``)."""

import sys

from voice.app.history_cli import main

if __name__ == "__main__":
    sys.exit(main())
