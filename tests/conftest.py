"""Make `tests/` importable so test modules can `import corpus` under any pytest import mode."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
