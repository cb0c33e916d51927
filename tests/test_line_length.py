"""Every Python source of the project keeps to 120 columns, the width it is written to (no linter is a dependency)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("harness", "reference", "submission", "examples", "tests", "tools")


def test_no_line_is_longer_than_120_columns():
    long = [f"{path.relative_to(ROOT)}:{n}" for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if len(line) > 120]
    assert long == []
