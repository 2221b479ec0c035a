"""The benchmark suite of `zymo bench`, which lives in zymo/bench/ (so that an installed zymo
has it): `python bench/run.py [--quick] [--output FILE]` runs it as `zymo bench` does."""
import sys

from zymo.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
