"""Kernels defined in strings given to `exec` (numba users build them so: numba compiles
bytecode). zymo compiles source, so while `zymo.cuda` is imported, `exec` of a string compiles
it as Python would and records the text for the functions it defines (frontend.source); the
code, its file name ("<string>") and what it does are unchanged."""
from __future__ import annotations

import __future__
import builtins
import sys

from ..frontend.source import register_source

_FUTURE_FLAGS = 0
for _name in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _name).compiler_flag

_exec = builtins.exec


def exec_recording_source(source, globals=None, locals=None, /, **kwargs):
    """`exec`, recording the source of a string before running it."""
    if isinstance(source, (str, bytes, bytearray)):
        caller = sys._getframe(1)
        if globals is None:               # exec's default: the caller's namespaces
            globals, locals = caller.f_globals, caller.f_locals if locals is None else locals
        text = source if isinstance(source, str) else bytes(source).decode()
        # the caller's __future__ imports apply to the string, as they would to exec's own
        # compile
        code = compile(text, "<string>", "exec", caller.f_code.co_flags & _FUTURE_FLAGS, True)
        register_source(code, text)
        source = code
    return _exec(source, globals, locals, **kwargs)


def install() -> None:
    if builtins.exec is _exec:
        builtins.exec = exec_recording_source
