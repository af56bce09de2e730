"""Paths the tests share."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
BIN = REPO / ".venv" / "bin"
