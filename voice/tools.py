"""The tools API for a person's own tools files: ``from voice.tools import tool``.

The machinery lives in :mod:`shell.tools` (the session runs the tools); this is the name
users import, kept stable while the folders below it move. It offers exactly what
``shell.tools`` offers (its ``__all__``), listed once, there.
"""

import shell.tools
from shell.tools import *  # noqa: F403

__all__ = shell.tools.__all__
