"""The CUDA disk cache without a GPU: entry format, corruption, atomic writes, keys, `zymo cache
clear`, and PTX compiled once then read back (the NVPTX backend needs no GPU)."""
from __future__ import annotations

import os

import pytest

import zymo as zm
from zymo.cli import main
from zymo.runtime.cuda import cache, driver


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ZYMO_CACHE", raising=False)
    return tmp_path


def test_entry_round_trip(tmp_path):
    path = tmp_path / "a" / "entry.ptx"
    cache.write_entry(path, {"kernel_name": "k"}, b"payload\n\0bytes")
    assert cache.read_entry(path) == ({"kernel_name": "k"}, b"payload\n\0bytes")
    assert [p.name for p in path.parent.iterdir()] == ["entry.ptx"]   # no temporary left


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "empty", "length"])
def test_damaged_entry_is_dropped(tmp_path, damage):
    path = tmp_path / "entry.ptx"
    cache.write_entry(path, {"kernel_name": "k"}, b"x" * 100)
    data = path.read_bytes()
    damaged = {"truncate": data[:-7], "flip": data[:-1] + b"y", "magic": b"nope" + data[4:],
               "empty": b"", "length": data + b"extra"}[damage]
    path.write_bytes(damaged)
    before = cache.stats["corrupt"]
    assert cache.read_entry(path) is None
    assert cache.stats["corrupt"] == before + 1
    assert not path.exists(), "a damaged entry is deleted so that it gets rebuilt"


def test_missing_entry_is_a_miss(tmp_path):
    before = cache.stats["corrupt"]
    assert cache.read_entry(tmp_path / "nothing.ptx") is None
    assert cache.stats["corrupt"] == before


def test_write_goes_through_a_temporary_and_os_replace(tmp_path, monkeypatch):
    calls = []
    real_replace = os.replace

    def replace(source, target):
        calls.append((os.fspath(source), os.fspath(target), os.path.exists(target)))
        real_replace(source, target)

    monkeypatch.setattr(cache.os, "replace", replace)
    path = tmp_path / "entry.cubin"
    cache.write_entry(path, {}, b"old")
    cache.write_entry(path, {}, b"new")
    assert len(calls) == 2
    source, target, existed = calls[1]
    assert target == str(path) and existed and os.path.dirname(source) == str(tmp_path)
    assert cache.read_entry(path) == ({}, b"new")


def test_unwritable_cache_costs_only_speed(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache.write_entry(blocker / "sub" / "entry.ptx", {}, b"data")   # must not raise


def test_keys_cover_ir_arch_and_options():
    base = cache.ptx_key("ir", "sm_90", {"fastmath": False})
    assert base == cache.ptx_key("ir", "sm_90", {"fastmath": False})
    assert base != cache.ptx_key("ir2", "sm_90", {"fastmath": False})
    assert base != cache.ptx_key("ir", "sm_80", {"fastmath": False})
    assert base != cache.ptx_key("ir", "sm_90", {"fastmath": True})


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path / "z"))
    assert cache.cache_dir() == tmp_path / "z"
    monkeypatch.delenv("ZYMO_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "zymo"


def test_cache_clear_command(cache_root, capsys):
    cache.write_entry(cache_root / "cuda" / "ab" / "abc.ptx", {}, b"1")
    cache.write_entry(cache_root / "cuda" / "cd" / "cde.cubin", {}, b"2")
    (cache_root / "unrelated.txt").write_text("kept")
    assert main(["cache", "clear"]) == 0
    assert "removed 2 cached file(s)" in capsys.readouterr().out
    assert not (cache_root / "cuda").exists()
    assert (cache_root / "unrelated.txt").exists()


@zm.kernel
def scale(a, x):
    i = zm.grid(1)
    if i < x.shape[0]:
        x[i] = a * x[i]


def test_ptx_compiled_once_then_read_back(cache_root, monkeypatch):
    monkeypatch.setattr(driver, "nvjitlink_version", lambda: None)   # no cubin on CPU
    signature = (zm.f32, zm.Array(zm.f32, 1))
    hits, misses = cache.stats["ptx_hit"], cache.stats["ptx_miss"]
    first = cache.compile_program(scale.specialize(*signature), "sm_90")
    assert cache.stats["ptx_miss"] == misses + 1
    fresh = zm.kernel(scale.py_func)   # a new process would start from an empty memory cache
    second = cache.compile_program(fresh.specialize(*signature), "sm_90")
    assert cache.stats["ptx_hit"] == hits + 1
    assert (second.ptx, second.kernel_name) == (first.ptx, first.kernel_name)
    assert ".entry" in first.ptx and first.kernel_name in first.ptx

    # damage the stored PTX: detected, recompiled, stored again
    [entry] = (cache_root / "cuda").rglob("*.ptx")
    entry.write_bytes(entry.read_bytes()[:-20])
    third = cache.compile_program(zm.kernel(scale.py_func).specialize(*signature), "sm_90")
    assert cache.stats["ptx_miss"] == misses + 2
    assert third.ptx == first.ptx
    assert cache.read_entry(entry) is not None

    # another arch is another entry
    cache.compile_program(zm.kernel(scale.py_func).specialize(*signature), "sm_80")
    assert cache.stats["ptx_miss"] == misses + 3


def test_cache_can_be_turned_off(cache_root, monkeypatch):
    monkeypatch.setattr(driver, "nvjitlink_version", lambda: None)
    monkeypatch.setenv("ZYMO_CACHE", "0")
    cache.compile_program(zm.kernel(scale.py_func).specialize(zm.f32, zm.Array(zm.f32, 1)),
                          "sm_90")
    assert not (cache_root / "cuda").exists()
