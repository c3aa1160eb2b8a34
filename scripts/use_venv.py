"""Run the importing script with the repository's .venv/bin/python (made by scripts/setup).

The Python scripts here start with ``#!/usr/bin/env python3``: whatever python3
comes first on PATH, without the pipeline's packages unless the .venv is
activated. Imported first, this re-runs the script with the .venv's interpreter
when it is another one, so ``scripts/make_turn_fixtures --out DIR`` works as the docs show
it. No .venv: one line that says to run scripts/setup.
"""

import os
import sys
from pathlib import Path

VENV = Path(__file__).resolve().parent.parent / ".venv"

if Path(sys.prefix).resolve() != VENV.resolve():
    python = VENV / "bin" / "python"
    if not python.exists():
        sys.exit(f"{Path(sys.argv[0]).name}: no {VENV}; run scripts/setup first")
    os.execv(python, [str(python), *sys.argv])
