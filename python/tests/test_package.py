"""test_package.py - the installed package without a GPU and without torch: import, version, PTX,
configs (fill, check, canonical text), explain, cache paths, and the documented errors (FajitError with
the library's status name and message; TypeError / ValueError naming the argument).
"""
import ctypes
import os
import subprocess
import sys

import pytest

import fajit
from fajit import _lib


def _run_python(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, check=True).stdout


def _have_gpu():
    try:
        fajit.cache_dir(0)
        return True
    except fajit.FajitError:
        return False


# ---- import ------------------------------------------------------------------------------------------
def test_import_needs_no_torch():
    out = _run_python("import sys, fajit; print('torch' in sys.modules, fajit.__version__)")
    assert out.split() == ["False", fajit.__version__]


def test_version_is_the_header_version():
    assert fajit.__version__ == _lib.H.defines["FAJIT_VERSION"]
    assert _lib.lib.fajit_version_number() == _lib.H.defines["FAJIT_VERSION_MAJOR"] * 10000 + \
        _lib.H.defines["FAJIT_VERSION_MINOR"] * 100 + _lib.H.defines["FAJIT_VERSION_PATCH"]


def test_library_and_header_ship_in_the_package():
    if os.environ.get("FAJIT_TEST_SOURCE_TREE"):
        pytest.skip("run from the source tree (FAJIT_TEST_SOURCE_TREE): the package is not installed")
    pkg = os.path.dirname(fajit.__file__)
    assert str(_lib.LIB_PATH) == os.path.join(pkg, "libfajit.so")
    assert str(_lib.HEADER_PATH) == os.path.join(pkg, "include", "fajit.h")


# ---- code generation ---------------------------------------------------------------------------------
def test_ptx_default():
    text = fajit.ptx(head_dim=128)
    assert text.startswith("// fajit ")
    assert ".target sm_80" in text and ".entry" in text
    assert fajit.ptx(head_dim=128) == text  # the same config gives the same bytes


def test_ptx_verbosity_and_paths():
    plain, teaching = fajit.ptx(head_dim=64, verbosity=0), fajit.ptx(head_dim=64, verbosity=2)
    assert len(teaching) > len(plain)
    assert ".target sm_90a" in fajit.ptx(head_dim=128, arch="sm_90a")
    assert fajit.ptx("sm_80 f16 d64 br64 bc64 s2 sw128 w4 causal") == \
        fajit.ptx(head_dim=64, dtype="f16", block_m=64, block_n=64, stages=2, swizzle=128, warps=4, causal=True)


def test_explain():
    text = fajit.explain(head_dim=256)
    assert "smem map" in text and "sm_80" in text


# ---- configs -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("head_dim", [64, 96, 128, 192, 256])
@pytest.mark.parametrize("arch", [None, "sm_90a"])
def test_config_round_trip(dtype, head_dim, arch):
    c = fajit.config(head_dim=head_dim, dtype=dtype, arch=arch, causal=True)
    assert c.head_dim == head_dim and c.dtype == dtype and c.causal == 1
    assert c.arch == (arch or "sm_80")
    again = fajit.config(c.text)
    assert again == c and str(again) == c.text and hash(again) == hash(c)
    assert fajit.config(c) == c
    assert c.as_dict()["head_dim"] == head_dim


def test_config_fill_keeps_given_fields():
    c = fajit.config(head_dim=128, block_n=32, stages=3)
    assert (c.block_n, c.stages) == (32, 3)
    assert repr(c) == f"fajit.Config({c.text!r})"


def test_config_shape():
    c = fajit.config(head_dim=128, shape={"batch": 2, "heads_q": 16, "heads_kv": 16, "seqlen_q": 4096,
                                          "seqlen_k": 4096})
    assert c.head_dim == 128
    with pytest.raises(ValueError, match="shape: unknown keys"):
        fajit.config(head_dim=128, shape={"bacth": 1})



def test_config_sched():
    """The causal work-tile schedule: the heuristic's lpt for grouped-query heads at any length and other heads up to
    Nq 8192 (static for multi-head Nq 16384), the text's " lpt" parsed back, sched="static" kept, a bad value refused
    naming the keyword."""
    gqa = (1, 64, 8, 8192, 8192)
    c = fajit.config(head_dim=64, arch="sm_90a", causal=True, shape=gqa)
    assert c.sched == 1 and " lpt xt causal" in c.text  # (xt: test_config_cross_tile)
    assert fajit.config(c.text).sched == 1
    assert fajit.config(head_dim=64, arch="sm_90a", causal=True, shape=(1, 32, 32, 8192, 8192)).sched == 1
    assert fajit.config(head_dim=64, arch="sm_90a", causal=True, shape=(1, 32, 32, 16384, 16384)).sched == 0
    s = fajit.config(head_dim=64, arch="sm_90a", causal=True, shape=gqa, sched="static")
    assert s.sched == -1 and "lpt" not in s.text
    with pytest.raises(ValueError, match="sched"):
        fajit.config(head_dim=64, arch="sm_90a", causal=True, sched="fast")
    with pytest.raises(ValueError, match="sched = 1"):
        fajit.config(head_dim=64, arch="sm_90a", causal=False, sched="lpt")

def test_config_cross_tile():
    """The cross-tile tail: the heuristic's pick for causal head_dim 64 with grouped-query heads (not multi-head, not
    head_dim 128), the text's " xt" parsed back, cross_tile=False kept, a refusal naming the field."""
    c = fajit.config(head_dim=64, arch="sm_90a", causal=True, shape=(1, 64, 8, 8192, 8192))
    assert c.cross_tile == 1 and " xt causal" in c.text
    assert fajit.config(c.text).cross_tile == 1
    assert fajit.config(head_dim=64, arch="sm_90a", causal=True, shape=(1, 32, 32, 8192, 8192)).cross_tile == 0
    assert fajit.config(head_dim=128, arch="sm_90a", causal=True, shape=(1, 64, 8, 8192, 8192)).cross_tile == 0
    off = fajit.config(head_dim=64, arch="sm_90a", causal=True, shape=(1, 64, 8, 8192, 8192), cross_tile=False)
    assert off.cross_tile == -1 and " xt" not in off.text
    # False is off (-1), not "pick" (0), though False == 0 in Python: overlap=False read as pick before
    plain = fajit.config(head_dim=64, arch="sm_90a", causal=True, overlap=False, pingpong=False)
    assert plain.overlap == -1 and plain.pingpong == -1 and " ov" not in plain.text
    with pytest.raises(ValueError, match="cross_tile"):
        fajit.config(head_dim=64, arch="sm_90a", causal=True, cross_tile="yes")
    with pytest.raises(ValueError, match="cross_tile = 1: the sm_80 path"):
        fajit.config(head_dim=64, arch="sm_80", causal=True, cross_tile=True)



def test_config_accurate():
    """The accurate softmax (fajit.h accurate): off unless asked, " acc" in the text and parsed back, its PTX the weight
    test's (a held threshold: no new instruction names, so the kernel differs from the default's), refusals naming
    the field on sm_100a and with e4m3."""
    base = fajit.config(head_dim=128, arch="sm_90a", causal=True)
    assert base.accurate == 0 and " acc" not in base.text
    for arch in ("sm_80", "sm_90a"):
        c = fajit.config(head_dim=128, arch=arch, causal=True, accurate=True)
        assert c.accurate == 1 and " acc causal" in c.text
        again = fajit.config(c.text)
        assert again == c and again.accurate == 1
        assert fajit.ptx(c) != fajit.ptx(fajit.config(c.text.replace(" acc", "")))
    off = fajit.config(head_dim=128, arch="sm_90a", causal=True, accurate=False)
    assert off.accurate == -1 and off.text == base.text
    with pytest.raises(ValueError, match="accurate = 1 on sm_100a"):
        fajit.config(head_dim=128, arch="sm_100a", accurate=True)
    with pytest.raises(ValueError, match="accurate = 1 with e4m3"):
        fajit.config(head_dim=128, arch="sm_90a", dtype="e4m3", accurate=True)

# ---- errors ------------------------------------------------------------------------------------------
def test_error_carries_status_and_message():
    with pytest.raises(fajit.FajitError) as e:
        fajit.config(head_dim=100)
    assert e.value.status == _lib.STATUS["FAJIT_ERR_INVALID_CONFIG"]
    assert e.value.status_name == "FAJIT_ERR_INVALID_CONFIG"
    assert "head_dim = 100" in e.value.message
    assert str(e.value).startswith("FAJIT_ERR_INVALID_CONFIG: head_dim = 100")
    assert isinstance(e.value, ValueError) and isinstance(e.value, fajit.FajitInputError)


def test_error_shows_the_arithmetic():
    with pytest.raises(fajit.FajitInputError, match=r"smem \d+ B .* exceeds"):
        fajit.config(head_dim=128, block_m=256, block_n=256, stages=4)


def test_check_without_fill_refuses_zeros():
    with pytest.raises(fajit.FajitInputError) as e:
        fajit.config(head_dim=128, fill=False)
    assert e.value.status_name == "FAJIT_ERR_INVALID_CONFIG"


@pytest.mark.parametrize("kwargs, exc, text", [
    (dict(head_dim=128, dtype="fp32"), TypeError, "dtype: 'fp32'"),
    (dict(head_dim=128, arch="sm_75"), ValueError, "arch: 'sm_75'"),
    (dict(head_dim=128, verbosity=3), ValueError, "verbosity: 3"),
    (dict(head_dim="128"), TypeError, "head_dim: expected an int"),
    (dict(head_dim=128, overlap="yes"), ValueError, "overlap: 'yes'"),
    (dict(), ValueError, "head_dim: required"),
    (dict(head_dim=128, device="cpu"), ValueError, "device: 'cpu'"),
])
def test_bad_arguments_name_the_argument(kwargs, exc, text):
    with pytest.raises(exc, match=text):
        fajit.ptx(**kwargs)


def test_bad_canonical_text():
    with pytest.raises(ValueError, match="canonical form"):
        fajit.config("sm_80 bf16 d128 br64")
    with pytest.raises(TypeError, match="config: expected"):
        fajit.config(42)
    with pytest.raises(TypeError, match="the fields head_dim, causal must not be given"):
        fajit.ptx("sm_80 f16 d64 br64 bc64 s2 sw128 w4 causal", head_dim=128, causal=True)


def test_gpu_calls_fail_cleanly_without_a_gpu():
    if _have_gpu():
        pytest.skip("a GPU is present: the no-GPU errors cannot be seen here")
    with pytest.raises(fajit.FajitError) as e:
        fajit.kernel_info(fajit.config(head_dim=128), device=0)
    assert e.value.status_name in ("FAJIT_ERR_LIBRARY_MISSING", "FAJIT_ERR_NO_DEVICE", "FAJIT_ERR_CUDA")
    with pytest.raises(fajit.FajitError) as e:
        fajit.tune(128, device=0, max_candidates=1)
    assert e.value.status_name in ("FAJIT_ERR_LIBRARY_MISSING", "FAJIT_ERR_NO_DEVICE", "FAJIT_ERR_CUDA")


# ---- cache paths ---------------------------------------------------------------------------------------
def test_cache_dir_follows_the_environment(tmp_path):
    code = "import fajit; print(fajit.cache_dir())"
    assert _run_python(code, FAJIT_CACHE_DIR=str(tmp_path)).strip() == str(tmp_path)
    assert _run_python(code, FAJIT_CACHE="0").strip() == ""
    xdg = tmp_path / "xdg"
    out = _run_python(code, XDG_CACHE_HOME=str(xdg), FAJIT_CACHE_DIR="").strip()
    assert out == str(xdg / "fajit")


# ---- the attention-args mirror, end to end through the library (no GPU: it validates first) -----------
def _args(**over):
    a = _lib.Args_c()
    if "struct_size" in dict(_lib.Args_c._fields_):
        a.struct_size = ctypes.sizeof(_lib.Args_c)
    a.dtype, a.batch, a.heads_q, a.heads_kv = _lib.DTYPE["FAJIT_DTYPE_BF16"], 2, 8, 2
    a.seqlen_q, a.seqlen_k, a.head_dim = 100, 77, 64
    a.q, a.k, a.v, a.o = 0x10000, 0x20000, 0x30000, 0x40000
    a.q_stride[:] = (8 * 100 * 64, 100 * 64, 64)
    for s in (a.k_stride, a.v_stride):
        s[:] = (2 * 77 * 64, 77 * 64, 64)
    a.o_stride[:] = a.q_stride[:]
    for k, v in over.items():
        if k.endswith("_stride"):
            getattr(a, k)[:] = v
        else:
            setattr(a, k, v)
    return a


@pytest.mark.parametrize("field, value, text", [
    ("heads_kv", 3, "heads_q = 8, heads_kv = 3"),
    ("head_dim", 100, "head_dim = 100"),
    ("seqlen_k", 0, "seqlen_k = 0"),
    ("v", 0x30008, "v = 0x30008"),
    ("o", 0, "o = 0"),
    ("o_stride", (8 * 100 * 64, 100 * 64, 60), "o_stride[2] = 60"),
    ("causal", 2, "causal = 2"),
])
def test_args_fields_reach_the_library(field, value, text):
    ctx = _lib.context(-1)  # no device: the forward validates its arguments, then says there is no device
    st = _lib.lib.fajit_attention_forward(ctx.handle, ctypes.byref(_args(**{field: value})), None)
    err = _lib.error(st)
    assert err.status_name == "FAJIT_ERR_INVALID_ARGUMENT" and text in err.message, err
    st = _lib.lib.fajit_attention_forward(ctx.handle, ctypes.byref(_args()), None)
    assert _lib.error(st).status_name == "FAJIT_ERR_NO_DEVICE"


def test_config_text_with_variant_words():
    """A variant config's canonical text (fajit_config_format's trailing words) parses back, bits and all."""
    import fajit
    text = "sm_80 bf16 d128 br64 bc64 s2 sw128 w4 causal win cap sink alibi chunk"
    c = fajit.config(text)
    assert c.text == text and c.mods == 31
    assert fajit.config("sm_80 bf16 d128 br64 bc64 s2 sw128 w4 causal").mods == 0
    with pytest.raises(ValueError, match="repeated"):
        fajit.config("sm_80 bf16 d128 br64 bc64 s2 sw128 w4 causal win win")
    with pytest.raises(ValueError, match="canonical form"):
        fajit.config("sm_80 bf16 d128 br64 bc64 s2 sw128 w4 causal window")


# ---- warm (issue 23): compile-only into the disk cache, without a GPU --------------------------------
def test_warm_compiles_to_the_disk_cache_without_a_gpu(tmp_path):
    code = ("import fajit, json\n"
            "seen = []\n"
            "specs = [{'head_dim': 64, 'arch': 'sm_80'}, 'sm_80 bf16 d64 br128 bc64 s2 sw128 w4 noncausal',\n"
            "         fajit.config(head_dim=64, arch='sm_80', causal=True)]\n"
            "r = fajit.warm(specs, sm='sm_80', threads=2, progress=lambda *a: seen.append((a[0], a[1], str(a[2]), a[3])))\n"
            "r2 = fajit.warm(specs, sm='sm_80')\n"
            "print(json.dumps([r.total, r.compiled, r.cached, r.failed, r2.compiled, r2.cached, seen]))\n")
    try:
        out = _run_python(code, FAJIT_CACHE_DIR=str(tmp_path))
    except subprocess.CalledProcessError as e:
        if "nvJitLink" in e.stderr:
            pytest.skip(f"nvJitLink unavailable: {e.stderr.strip().splitlines()[-1]}")
        raise
    import json
    total, compiled, cached, failed, compiled2, cached2, seen = json.loads(out)
    assert (total, compiled, cached, failed) == (2, 2, 0, 0)
    assert (compiled2, cached2) == (0, 2)
    assert [s[:2] for s in seen] == [[1, 2], [2, 2]] and all(s[3] for s in seen)
    assert "sm_80 bf16 d64 br128 bc64 s2 sw128 w4 noncausal" in [s[2] for s in seen]
    assert len(list((tmp_path / "kernels").glob("*.cubin"))) == 2


@pytest.mark.parametrize("kwargs, exc, text", [
    (dict(configs=[{"head_dim": 100}], sm="sm_80"), fajit.FajitInputError, "configs[0]: head_dim = 100"),
    (dict(configs=["sm_80 nonsense"], sm="sm_80"), ValueError, "configs[0]: config 'sm_80 nonsense'"),
    (dict(configs=[3], sm="sm_80"), TypeError, "configs[0]: expected a fajit.Config"),
    (dict(configs=[{"head_dim": 64, "bogus": 1}], sm="sm_80"), TypeError, "configs[0]"),
    (dict(configs=[{"head_dim": 64}], sm="sm_91"), fajit.FajitInputError, 'opts->sm = "sm_91"'),
    (dict(configs=[{"head_dim": 64}], sm="sm_80", threads=-1), ValueError, "threads"),
    (dict(configs=[{"head_dim": 64}] * 2, sm="sm_80", shapes=[(1, 8, 8, 128, 128)] * 3), ValueError,
     "3 shapes for 2 configs"),
])
def test_warm_bad_arguments_name_the_argument(kwargs, exc, text):
    with pytest.raises(exc) as e:
        fajit.warm(**kwargs)
    assert text in str(e.value)
