"""test_layout.py - the ctypes mirror of fajit.h cannot drift from the header: every struct fajit/_header.py
reads is compared with what a C compiler makes of the same header (sizeof, alignment, and offsetof and
sizeof of every field), by a small C program written from the parsed field list, built and run here.
A field added to fajit.h that the reader misses or mistypes shows up as a size or offset difference;
one it cannot read at all fails the import (HeaderError). Needs a C compiler (cc, or $CC); no GPU.
"""
import ctypes
import os
import shutil
import subprocess

import pytest

from fajit import _header, _lib


def _compiler():
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.fail("no C compiler (cc, gcc, clang or $CC): the layout check needs one")
    return cc


def _program(h):
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "fajit.h"', "int main(void) {"]
    for name, s in h.structs.items():
        lines.append(f'  printf("{name} size %zu align %zu\\n", sizeof({name}), _Alignof({name}));')
        for field, _ in s._fields_:
            lines.append(f'  printf("{name}.{field} offset %zu size %zu\\n", offsetof({name}, {field}), '
                         f'sizeof((({name} *)0)->{field}));')
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


def _c_layout(tmp_path, h):
    src = tmp_path / "layout.c"
    src.write_text(_program(h))
    exe = tmp_path / "layout"
    inc = os.path.dirname(str(h.path))
    subprocess.run([_compiler(), "-std=c11", "-I", inc, "-o", str(exe), str(src)], check=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()


def _py_layout(h):
    out = []
    for name, s in h.structs.items():
        out.append(f"{name} size {ctypes.sizeof(s)} align {ctypes.alignment(s)}")
        for field, ctype in s._fields_:
            out.append(f"{name}.{field} offset {getattr(s, field).offset} size {ctypes.sizeof(ctype)}")
    return out


def test_structs_match_the_compiler(tmp_path):
    h = _lib.H
    assert set(h.structs) >= {"fajit_config", "fajit_shape", "fajit_context_options", "fajit_kernel_info",
                              "fajit_attention_args", "fajit_tune_options", "fajit_tune_result"}
    c_lines, py_lines = _c_layout(tmp_path, h), _py_layout(h)
    diff = [f"C: {c!r}  ctypes: {p!r}" for c, p in zip(c_lines, py_lines) if c != p]
    assert len(c_lines) == len(py_lines) and not diff, "fajit.h and its ctypes mirror differ:\n" + "\n".join(diff)


def test_the_header_in_use_is_the_package_one():
    # the layouts above are those of the header shipped with this libfajit.so (or the source tree's)
    assert os.path.basename(str(_lib.HEADER_PATH)) == "fajit.h"
    assert _lib.H.defines["FAJIT_VERSION"] == _lib.lib.fajit_version().decode()


def test_every_prototype_is_mirrored():
    assert _lib.UNDECLARED == {}, f"prototypes of fajit.h this binding cannot call: {_lib.UNDECLARED}"
    assert "fajit_attention_forward" in _lib.H.prototypes


def test_reader_catches_a_field_it_cannot_mirror():
    text = "typedef struct fajit_x { int a; struct { int b; } nested; } fajit_x;"
    with pytest.raises(_header.HeaderError, match="fajit_x"):
        _header.Header(text)
    with pytest.raises(_header.HeaderError, match="'long double'"):
        _header.Header("typedef struct fajit_y { int a; long double b; } fajit_y;")


def test_reader_sees_an_appended_field():
    # the drift issue 11 brings: fields appended to fajit_attention_args are read, in order, with their types
    text = ("typedef struct fajit_z { int a; void *stream; size_t struct_size; uint64_t seqlens_k; int n, r; "
            "int64_t s[3]; } fajit_z;")
    z = _header.Header(text).structs["fajit_z"]
    assert [f for f, _ in z._fields_] == ["a", "stream", "struct_size", "seqlens_k", "n", "r", "s"]
    assert z.s.offset == 40 and ctypes.sizeof(z) == 64
