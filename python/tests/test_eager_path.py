"""test_eager_path.py - fajit.attention's eager fast path (a cached plan per checked call signature), without a
GPU: CPU tensors stand in for CUDA ones (fajit._torch._DEVICE_TYPE = "cpu", the context without a device),
and the library's fajit_attention_forward is replaced by a recorder that keeps the bytes of each
fajit_attention_args it is given and returns FAJIT_OK. Checked: a repeated signature skips the checks and
gets the args the op's launch (_forward) fills; a changed stride, dtype, shape, device or other argument
misses; a bad argument raises the same error on every call; the plan is not taken under modes,
transforms, the profiler, with subclasses or tensors that require grad. Skipped without torch.
"""
import ctypes
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: fajit.attention needs it")

import fajit  # noqa: E402
from fajit import _lib, _torch  # noqa: E402


class Eager:
    """The monkeypatched launch path: .launches (args bytes per library call), .checks (check_args calls),
    .keys (the key each call without a plan got: None = it took the op), .plans (this thread's cache)."""

    def __init__(self, monkeypatch):
        self.launches, self.checks, self.keys = [], 0, []
        ctx = _lib.context(-1)
        monkeypatch.setattr(_torch, "_DEVICE_TYPE", "cpu")
        monkeypatch.setattr(_lib, "context", lambda device: ctx)
        monkeypatch.setattr(_torch, "_raw_stream", lambda device: 0)
        monkeypatch.setattr(_torch._local, "plans", {})
        monkeypatch.setattr(_lib.lib, "fajit_attention_forward", self._record)
        check_args, checked = _torch.check_args, _torch._checked

        def counting_check_args(*args, **kwargs):
            self.checks += 1
            return check_args(*args, **kwargs)

        def recording_checked(key, *args):
            self.keys.append(key)
            return checked(key, *args)
        monkeypatch.setattr(_torch, "check_args", counting_check_args)
        monkeypatch.setattr(_torch, "_checked", recording_checked)
        self.plans = _torch._local.plans

    def _record(self, handle, ref, cfg):
        self.launches.append(bytes(ref._obj))
        return 0

    def args(self, i=-1):
        """The i-th launch's fajit_attention_args."""
        return _lib.Args_c.from_buffer_copy(self.launches[i])


@pytest.fixture
def eager(monkeypatch):
    if not _torch._EAGER:
        pytest.skip(f"torch {torch.__version__} lacks what the fast path's guards read: it is off")
    return Eager(monkeypatch)


def _qkv(b=2, hq=8, hkv=2, nq=200, nk=300, d=64, dtype=torch.bfloat16):
    return (torch.randn(b, hq, nq, d).to(dtype), torch.randn(b, hkv, nk, d).to(dtype),
            torch.randn(b, hkv, nk, d).to(dtype))


def _op_args(eager, q, k, v, o, causal=False, scale=None, layout="bhnd", lse=None, config=""):
    """The args the op's launch (_forward) gives the library for the same call."""
    scale = scale if scale is not None else q.shape[-1] ** -0.5
    _torch._forward(q, k, v, o, lse, causal, scale, layout == "bnhd", config)
    return eager.launches.pop()


def test_repeat_skips_the_checks_and_matches_the_op(eager):
    q, k, v = _qkv()
    o = torch.empty_like(q)
    assert fajit.attention(q, k, v, causal=True, out=o) is o
    assert (eager.checks, len(eager.plans), len(eager.launches)) == (1, 1, 1)
    version = o._version
    assert fajit.attention(q, k, v, causal=True, out=o) is o
    assert (eager.checks, len(eager.plans), len(eager.launches)) == (1, 1, 2), "the second call was checked again"
    assert o._version > version, "out's version counter was not bumped (autograd would miss the write)"
    assert eager.launches[0] == eager.launches[1] == _op_args(eager, q, k, v, o, causal=True)
    q2, k2, v2 = _qkv()  # new tensors, same signature: a hit with their pointers
    o2 = torch.empty_like(q2)
    fajit.attention(q2, k2, v2, causal=True, out=o2)
    assert eager.checks == 1 and eager.launches[-1] == _op_args(eager, q2, k2, v2, o2, causal=True)
    a = eager.args()
    assert (a.q, a.k, a.v, a.o) == (q2.data_ptr(), k2.data_ptr(), v2.data_ptr(), o2.data_ptr())


def test_allocating_form_and_lse(eager):
    q, k, v = _qkv(nq=150)
    o1, lse1 = fajit.attention(q, k, v, return_lse=True, layout="bhnd")
    o2, lse2 = fajit.attention(q, k, v, return_lse=True, layout="bhnd")
    assert eager.checks == 1 and len(eager.launches) == 2
    for o, lse, launch in ((o1, lse1, eager.launches[0]), (o2, lse2, eager.launches[1])):
        assert o.shape == q.shape and o.dtype == q.dtype and o.is_contiguous()
        assert lse.shape == (2, 8, 150) and lse.dtype == torch.float32
        a = _lib.Args_c.from_buffer_copy(launch)
        assert (a.o, a.lse) == (o.data_ptr(), lse.data_ptr())
    assert o1.data_ptr() != o2.data_ptr()  # a new O per call
    assert eager.launches[1] == _op_args(eager, q, k, v, o2, lse=lse2)
    assert fajit.attention(q, k, v) is not None and eager.checks == 2  # return_lse=False: another signature


# each changes one thing the checks or the args read: the call must miss (checked again, a second plan)
def _variants(q, k, v, o):
    kt = torch.empty(2, 300, 2, 64, dtype=k.dtype).transpose(1, 2).copy_(k)  # [B, N, H, D] storage: other strides
    wide = torch.empty(2, 8, 200, 72, dtype=q.dtype)[..., :64].copy_(q)
    return {
        "k strides": ((q, kt, v, o), {}),
        "q strides": ((wide, k, v, o), {}),
        "out strides": ((q, k, v, torch.empty(2, 8, 200, 72, dtype=o.dtype)[..., :64]), {}),
        "shape": ((q[:, :, :199], k, v, o[:, :, :199]), {}),
        "kv shape": ((q, k[:, :, :299], v[:, :, :299], o), {}),
        "causal": ((q, k, v, o), {"causal": True}),
        "scale": ((q, k, v, o), {"scale": 0.5}),
        "lse": ((q, k, v, o), {"return_lse": True}),
        "layout": ((q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), o.transpose(1, 2)), {"layout": "bnhd"}),
        "no out": ((q, k, v, None), {}),
        "dtype": ((q.half(), k.half(), v.half(), o.half()), {}),
        "num_splits": ((q, k, v, o), {"num_splits": 1}),
    }


@pytest.mark.parametrize("name", list(_variants(*_qkv(), torch.empty(2, 8, 200, 64, dtype=torch.bfloat16))))
def test_a_changed_signature_misses(eager, name):
    q, k, v = _qkv()
    o = torch.empty_like(q)
    fajit.attention(q, k, v, out=o)
    (q2, k2, v2, o2), kw = _variants(q, k, v, o)[name]
    fajit.attention(q2, k2, v2, out=o2, **kw)
    assert eager.checks == 2 and len(eager.plans) == 2, f"{name}: the changed call hit the first call's plan"
    fajit.attention(q2, k2, v2, out=o2, **kw)
    assert eager.checks == 2, f"{name}: the repeat of the changed call missed"
    if o2 is not None and "num_splits" not in kw:
        fast = eager.launches[-1]
        lse = fast and None
        if kw.get("return_lse"):  # its LSE is new per call: compare the rest
            a = eager.args()
            lse = torch.empty(2, 8, 200)
            fast = bytes(a)
            expected = _lib.Args_c.from_buffer_copy(_op_args(eager, q2, k2, v2, o2, lse=lse, **{
                x: y for x, y in kw.items() if x != "return_lse"}))
            expected.lse = a.lse
            assert fast == bytes(expected)
        else:
            assert fast == _op_args(eager, q2, k2, v2, o2, **kw), f"{name}: the plan's args differ from the op's"


def test_another_device_misses_and_is_refused(eager):
    q, k, v = _qkv()
    o = torch.empty_like(q)
    fajit.attention(q, k, v, out=o)
    km = k.to("meta")  # same shape, strides and dtype on another device
    for _ in range(2):
        with pytest.raises(ValueError, match=r"k: on meta; fajit runs on CUDA tensors"):
            fajit.attention(q, km, v, out=o)
    assert len(eager.plans) == 1 and len(eager.launches) == 1


@pytest.mark.parametrize("bad, exc, text", [
    ({"k": "half"}, TypeError, r"k: dtype torch.float16 differs from q's torch.bfloat16"),
    ({"scale": True}, ValueError, r"scale: True: must be a finite non-zero number"),
    ({"scale": float("nan")}, ValueError, r"scale: nan"),
    ({"layout": "nhd"}, ValueError, r"layout: 'nhd'"),
    ({"layout": ["bhnd"]}, ValueError, r"layout: \['bhnd'\]"),
    ({"num_splits": 1.0}, ValueError, r"num_splits: 1.0"),
    ({"num_splits": True}, ValueError, r"num_splits: True"),
    ({"config": 3}, TypeError, r"config: expected a fajit.Config"),
    ({"out": "rows"}, ValueError, r"out: shape \(2, 8, 199, 64\) differs"),
])
def test_a_bad_argument_raises_every_time(eager, bad, exc, text):
    # the good call with scale=1 / num_splits=1 first: a bool equal to them (True == 1) must not hit its plan
    q, k, v = _qkv()
    o = torch.empty_like(q)
    good = dict(scale=1, num_splits=1) if "scale" in bad or "num_splits" in bad else {}
    fajit.attention(q, k, v, out=o, **good)
    fajit.attention(q, k, v, out=o, **good)
    assert eager.checks == 1
    kw = dict(good, out=o)
    kw.update({x: y for x, y in bad.items() if x not in ("k", "out")})
    k2 = k.half() if bad.get("k") else k
    if bad.get("out"):
        kw["out"] = o[:, :, :199]
    for _ in range(3):
        with pytest.raises(exc, match=text):
            fajit.attention(q, k2, v, **kw)
    assert eager.checks == 4 and len(eager.launches) == 2


def test_not_taken_under_modes_transforms_profiler_grad_subclasses(eager):
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class PassFunction(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class PassDispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    q, k, v = _qkv()
    o = torch.empty_like(q)
    fajit.attention(q, k, v, out=o)
    assert eager.keys[-1] is not None and len(eager.plans) == 1

    def op_taken(call):
        """The call went to the checks with no key (so to the op: here, with CPU tensors, torch says the
        op has no CPU kernel) and launched nothing through a plan."""
        before, launches = len(eager.keys), len(eager.launches)
        try:
            call()
        except (NotImplementedError, RuntimeError):
            pass
        return len(eager.keys) == before + 1 and eager.keys[-1] is None and len(eager.launches) == launches

    assert op_taken(lambda: fajit.attention(torch.nn.Parameter(q, requires_grad=False), k, v, out=o))
    assert op_taken(lambda: fajit.attention(q, k.requires_grad_(), v, out=o))
    k.requires_grad_(False)
    with torch.no_grad():  # requires_grad takes the op in every grad mode, as before
        assert op_taken(lambda: fajit.attention(q, k.requires_grad_(), v, out=o))
    k.requires_grad_(False)
    with PassFunction():
        assert op_taken(lambda: fajit.attention(q, k, v, out=o))
    with torch.device("cpu"):  # a TorchFunctionMode too
        assert op_taken(lambda: fajit.attention(q, k, v, out=o))
    with PassDispatch():
        assert op_taken(lambda: fajit.attention(q, k, v, out=o))
    with torch.autograd.profiler.profile():
        assert op_taken(lambda: fajit.attention(q, k, v, out=o))
    assert op_taken(lambda: torch.vmap(lambda x: fajit.attention(x, k, v), in_dims=0)(q[None]))
    assert op_taken(lambda: torch.func.functionalize(lambda x: fajit.attention(x, k, v, out=o))(q))
    launches, keys = len(eager.launches), len(eager.keys)
    fajit.attention(q, k, v, out=o)  # and plain eager again: the plan, unchecked
    assert len(eager.launches) == launches + 1 and len(eager.keys) == keys


def test_wrapper_tensor_without_data_takes_the_op(eager):
    q, k, v = _qkv()
    o = torch.empty_like(q)
    fajit.attention(q, k, v, out=o)
    f = torch._to_functional_tensor(q)  # type torch.Tensor, same metadata, data_ptr() 0
    try:
        fajit.attention(f, k, v, out=o)
    except (NotImplementedError, RuntimeError):
        pass
    assert len(eager.launches) == 1, "a tensor without data reached the library through the plan"
    assert eager.keys[-1] is None


def test_plans_are_bounded_and_per_thread(eager, monkeypatch):
    monkeypatch.setattr(_torch, "_MAX_PLANS", 3)
    q, k, v = _qkv()
    for n in range(190, 195):
        fajit.attention(q[:, :, :n], k, v)
    assert len(eager.plans) == 3
    seen = []
    t = threading.Thread(target=lambda: seen.append((fajit.attention(q, k, v).shape, len(_torch._local.plans))))
    t.start()
    t.join()
    assert seen == [(q.shape, 1)] and len(eager.plans) == 3


def test_decode_arguments(eager):
    q, k, v = _qkv(nq=4, nk=256)
    lens = torch.zeros(2, dtype=torch.int32)
    table = torch.zeros(2, 4, dtype=torch.int32)
    pool_k, pool_v = torch.zeros(10, 2, 64, 64, dtype=q.dtype), torch.zeros(10, 2, 64, 64, dtype=q.dtype)
    for _ in range(2):
        fajit.attention(q, k, v, seqlens_k=lens, num_splits=3)
        fajit.attention(q, pool_k, pool_v, block_table=table, seqlens_k=lens, num_splits=1)
    assert eager.checks == 2 and len(eager.launches) == 4
    a = eager.args()
    assert (a.seqlens_k, a.block_table, a.max_pages, a.page_size, a.seqlen_k) == (lens.data_ptr(), table.data_ptr(),
                                                                                  4, 64, 256)
    assert a.workspace == 0  # num_splits=1: no split
    with pytest.raises(TypeError, match=r"seqlens_k: dtype torch.int64"):
        fajit.attention(q, k, v, seqlens_k=lens.long(), num_splits=3)
    with pytest.raises(ValueError, match=r"page_size: True"):
        fajit.attention(q, pool_k, pool_v, block_table=table, page_size=True, num_splits=1)
    a = _lib.Args_c.from_buffer_copy(eager.launches[0])
    assert a.num_splits == 3 and a.workspace != 0 and a.workspace_bytes > 0


def test_args_struct_reused_without_copies(eager):
    # the plan hands the library one struct per signature (byref of the same object, no per-call Structure)
    q, k, v = _qkv()
    refs = []
    monkeypatch_record = eager._record

    def record(handle, ref, cfg):
        refs.append(ctypes.addressof(ref._obj))
        return monkeypatch_record(handle, ref, cfg)
    _lib.lib.fajit_attention_forward = record  # restored by the fixture's monkeypatch
    eager.plans.clear()
    for _ in range(3):
        fajit.attention(q, k, v)
    assert len(set(refs)) == 1 and len(refs) == 3


def test_host_overhead_script_runs():
    # bench/python_overhead_host.py (the Python side timed without a GPU) on a few calls: it asserts that its
    # eager rows took their plans
    script = Path(__file__).resolve().parents[2] / "bench" / "python_overhead_host.py"
    if not script.is_file() or not shutil.which("cc"):
        pytest.skip(f"{script} or cc not found (tests run outside the source tree, or no C compiler)")
    out = subprocess.run([sys.executable, str(script), "--rounds", "3", "--calls", "20", "--seqlen", "256"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "| eager path, out=o |" in out.stdout and "| torch.empty of O |" in out.stdout, out.stdout


def test_plans_keep_no_tensor_alive(eager):
    import gc
    import weakref
    q, k, v = _qkv()
    o = torch.empty_like(q)
    fajit.attention(q, k, v, out=o)
    fajit.attention(q, k, v, return_lse=True)
    assert len(eager.plans) == 2
    refs = [weakref.ref(t) for t in (q, k, v, o)]
    del q, k, v, o
    gc.collect()
    assert all(r() is None for r in refs), "a cached plan keeps a caller's tensor alive"


def test_inference_mode_takes_the_plan(eager):
    # torch.inference_mode (serving): no guard refuses it; O is an inference tensor, as the op's would be
    q, k, v = _qkv()
    with torch.inference_mode():
        o1 = fajit.attention(q, k, v)
        o2 = fajit.attention(q, k, v)
        out = torch.empty_like(q)
        assert fajit.attention(q, k, v, out=out) is out  # an inference tensor as out: no version counter
    assert eager.checks == 2 and len(eager.launches) == 3 and None not in eager.keys
    assert o1.is_inference() and o2.is_inference()


class _Sizes:
    """A stand-in for fajit_attention_workspace_size: answers .size bytes, counts its calls."""

    def __init__(self, size):
        self.size, self.calls = size, 0

    def __call__(self, handle, args_ref, cfg, n_ref):
        self.calls += 1
        n_ref._obj.value = self.size
        return 0


def test_workspace_follows_a_tune(eager, monkeypatch):
    # fajit.tune can change the kernel a shape gets, so the decode tile and the split count num_splits=0 runs
    # with: the workspace size a plan (or the op's cache) asked for before must be asked for again, else the
    # library refuses the call ("args->workspace_bytes = ...: need ...") once the new choice splits more.
    if not _torch._WORKSPACE:
        pytest.skip("this libfajit has no fajit_attention_workspace_size")
    sizes = _Sizes(4096)
    monkeypatch.setattr(_lib.lib, "fajit_attention_workspace_size", sizes)
    q, k, v = _qkv(nq=1, nk=256)
    lens = torch.zeros(2, dtype=torch.int32)
    for _ in range(2):
        fajit.attention(q, k, v, seqlens_k=lens)
    assert (sizes.calls, eager.args().workspace_bytes) == (1, 4096)
    ctx = _lib.context(-1)
    monkeypatch.setattr(_lib.lib, "fajit_tune", lambda *args: 1)  # a failing tune: winners may still have changed
    with pytest.raises(fajit.FajitError):
        fajit.tune(128, device=0, max_candidates=1)
    sizes.size = 65536
    fajit.attention(q, k, v, seqlens_k=lens)
    a = eager.args()
    assert (sizes.calls, a.workspace_bytes) == (2, 65536) and a.workspace != 0, "the plan kept the old size"
    fajit.attention(q, k, v, seqlens_k=lens)
    assert sizes.calls == 2 and eager.checks == 1  # asked once per change, the plan kept
    o = torch.empty_like(q)  # the op's launch (_forward) reads the same cache
    _torch._forward(q, k, v, o, None, False, 0.125, False, "", lens)
    assert sizes.calls == 2 and eager.args().workspace_bytes == 65536
    ctx.choices_changed()
    sizes.size = 0  # the new choice does not split: no workspace, none passed
    fajit.attention(q, k, v, seqlens_k=lens)
    a = eager.args()
    assert (sizes.calls, a.workspace, a.workspace_bytes) == (3, 0, 0)
