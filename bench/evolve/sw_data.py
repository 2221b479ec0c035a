"""Seeded synthetic DNA read/reference pairs for the Smith-Waterman workload.

Stands in for ADEPT's 30 000-pair test set, whose fasta files are not available: references of
200-1000 bp (uniform), reads of 100-200 bp cut from a random window of their reference and
mutated like sequencing reads (about 5 % substitutions, 1 % insertions and 1 % deletions of
1-3 bases), and a fraction of unrelated pairs (random read against random reference) so that
low-scoring alignments are exercised too.

Bases are coded A=0, C=1, G=2, T=3 (uint8). Sequences are packed back to back, as in ADEPT, with
int32 offsets and lengths per pair. The kernels map one thread to one query base, so a query
may hold at most MAX_QUERY_LEN bases (the largest block the kernels are written for); a
reference at most MAX_REF_LEN (the V0 kernel stages it in shared memory).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_QUERY_LEN = 256
MAX_REF_LEN = 1024

REF_LEN = (200, 1000)
QUERY_LEN = (100, 200)
SUBSTITUTION = 0.05
INSERTION = 0.01
DELETION = 0.01
MAX_INDEL = 3
UNRELATED = 0.1


@dataclass
class Pairs:
    q_seq: np.ndarray  # uint8, all queries back to back
    q_off: np.ndarray  # int32, start of query p in q_seq
    q_len: np.ndarray  # int32
    r_seq: np.ndarray  # uint8, all references back to back
    r_off: np.ndarray
    r_len: np.ndarray

    def __len__(self) -> int:
        return len(self.q_len)

    def query(self, p: int) -> np.ndarray:
        return self.q_seq[self.q_off[p]:self.q_off[p] + self.q_len[p]]

    def ref(self, p: int) -> np.ndarray:
        return self.r_seq[self.r_off[p]:self.r_off[p] + self.r_len[p]]


def mutate(seq: np.ndarray, rng: np.random.Generator, sub: float = SUBSTITUTION,
           ins: float = INSERTION, dele: float = DELETION) -> np.ndarray:
    """A copy of `seq` with random substitutions and short insertions and deletions."""
    out = []
    k = 0
    while k < len(seq):
        u = rng.random()
        if u < dele:
            k += int(rng.integers(1, MAX_INDEL + 1))
            continue
        if u < dele + ins:
            out.extend(rng.integers(0, 4, int(rng.integers(1, MAX_INDEL + 1))).tolist())
        base = int(seq[k])
        if rng.random() < sub:
            base = (base + int(rng.integers(1, 4))) % 4  # always a different base
        out.append(base)
        k += 1
    return np.array(out, np.uint8)


def _pack(seqs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lens = np.array([len(s) for s in seqs], np.int32)
    offs = np.zeros(len(seqs), np.int32)
    offs[1:] = np.cumsum(lens[:-1])
    flat = np.concatenate(seqs).astype(np.uint8) if seqs else np.zeros(0, np.uint8)
    return flat, offs, lens


def _codes(seq) -> np.ndarray:
    if isinstance(seq, str):
        return np.array(["ACGT".index(c) for c in seq], np.uint8)
    return np.asarray(seq, np.uint8)


def pack_pairs(queries: list, refs: list) -> Pairs:
    """Pairs from lists of base-code sequences (or strings over ACGT)."""
    return Pairs(*_pack([_codes(q) for q in queries]), *_pack([_codes(r) for r in refs]))


def subset(pairs: Pairs, pick: np.ndarray) -> Pairs:
    """The pairs at positions `pick`, packed in that order (one gather per sequence array: a
    fresh sample for every evaluation of a search)."""
    def gather(seq, offs, lens):
        lens = lens[pick].astype(np.int32)
        starts = np.zeros(len(lens), np.int32)
        starts[1:] = np.cumsum(lens[:-1])
        where = np.repeat(offs[pick].astype(np.int64) - starts, lens) + np.arange(lens.sum())
        return seq[where], starts, lens
    return Pairs(*gather(pairs.q_seq, pairs.q_off, pairs.q_len),
                 *gather(pairs.r_seq, pairs.r_off, pairs.r_len))


def make_pairs(n: int, rng: np.random.Generator, ref_len: tuple[int, int] = REF_LEN,
               query_len: tuple[int, int] = QUERY_LEN, unrelated: float = UNRELATED) -> Pairs:
    """`n` pairs; lengths are drawn uniformly from the inclusive ranges given."""
    assert query_len[1] <= MAX_QUERY_LEN and ref_len[1] <= MAX_REF_LEN
    queries, refs = [], []
    for _ in range(n):
        ref = rng.integers(0, 4, int(rng.integers(ref_len[0], ref_len[1] + 1))).astype(np.uint8)
        want = int(rng.integers(query_len[0], query_len[1] + 1))
        if rng.random() < unrelated:
            query = rng.integers(0, 4, want).astype(np.uint8)
        else:
            width = min(want, len(ref))
            start = int(rng.integers(0, len(ref) - width + 1))
            query = mutate(ref[start:start + width], rng)
            # indels change the length; keep the read within the query-length range
            query = query[:min(len(query), query_len[1])]
            if len(query) == 0:
                query = ref[start:start + 1].copy()
        queries.append(query)
        refs.append(ref)
    return pack_pairs(queries, refs)


def cached_pairs(n: int, seed) -> Pairs:
    """`make_pairs(n, default_rng(seed))`, kept on disk (generating 200,000 pairs takes about
    half a minute, and every worker of a search needs them): written once, atomically."""
    import dataclasses
    import os
    import tempfile
    from pathlib import Path
    key = "-".join(str(s) for s in np.atleast_1d(seed))
    path = Path(os.environ.get("ZYMO_SW_CACHE", tempfile.gettempdir())) / \
        f"zymo-sw-pairs-{n}-{key}-v1.npz"
    if path.exists():
        with np.load(path) as data:
            return Pairs(*(data[f.name] for f in dataclasses.fields(Pairs)))
    pairs = make_pairs(n, np.random.default_rng(seed))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp.npz")
    np.savez(partial, **{f.name: getattr(pairs, f.name) for f in dataclasses.fields(Pairs)})
    os.replace(partial, path)
    return pairs
