"""Make `tests/` importable so test modules can `import corpus` under any pytest import mode,
and verify the IR after every pass in every test (the user-facing switch is ZYMO_VERIFY=1)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("ZYMO_VERIFY", "1")
