"""``python -m voice.run``: the voice assistant (see ``voice/app/cli.py``)."""

import sys

from voice.app.cli import main

if __name__ == "__main__":
    sys.exit(main())
