"""Puts this folder on sys.path, so the tests import the package from here without installing it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
