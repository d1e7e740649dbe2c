"""_config.py - kernel configs from Python: fajit.config (fill / check / canonical text), fajit.ptx,
fajit.explain, fajit.tune and fajit.cache_dir. No torch and no GPU needed unless a device is named.
"""
import ctypes
import math
import re
import sys

from . import _lib
from ._lib import ARCH, DTYPE, Config_c, Shape_c, check, lib

ARCH_NAMES = {ARCH["FAJIT_ARCH_SM80"]: "sm_80", ARCH["FAJIT_ARCH_SM90A"]: "sm_90a",
              ARCH["FAJIT_ARCH_SM100A"]: "sm_100a"}
DTYPE_NAMES = {DTYPE["FAJIT_DTYPE_F16"]: "f16", DTYPE["FAJIT_DTYPE_BF16"]: "bf16"}
if "FAJIT_DTYPE_E4M3" in DTYPE:
    DTYPE_NAMES[DTYPE["FAJIT_DTYPE_E4M3"]] = "e4m3"
_DTYPE_ALIASES = {"f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16", "torch.float16": "f16",
                  "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16"}
if "FAJIT_DTYPE_E4M3" in DTYPE:
    _DTYPE_ALIASES.update({"e4m3": "e4m3", "fp8": "e4m3", "float8_e4m3fn": "e4m3", "torch.float8_e4m3fn": "e4m3"})
# canonical text, as fajit_config_format writes it: "sm_80 bf16 d128 br64 bc64 s2 sw128 w4 noncausal"
# ("cw2" after the warps when col_warps > 1; "ov" / "pp" / "roll" / "lpt" / "xt" when the sm_90a schedule flags are on,
# "acc" when the accurate softmax is)
_TEXT = re.compile(r"^\s*(sm_\w+)\s+(f16|bf16|e4m3)((?:,kv=e4m3)?(?:,o=(?:f16|bf16))?)\s+d(\d+)\s+br(\d+)\s+bc(\d+)\s+s(\d+)\s+sw(none|\d+)"
                   r"\s+w(\d+)(?:\s+cw(\d+))?(\s+ov)?(\s+pp)?(\s+roll)?(\s+lpt)?(\s+xt)?(\s+acc)?\s+(causal|noncausal)"
                   r"((?:\s+(?:win|cap|sink|alibi|chunk))*)\s*$")
# the attention variants' words after the mask, in fajit_config_format's order, and their FAJIT_MOD_* bits
_MOD_WORDS = {"win": 1, "cap": 2, "sink": 4, "alibi": 8, "chunk": 16}


class Config:
    """A checked kernel config (fajit_config), made by fajit.config(). str() and .text give its canonical
    text; its fields read as attributes (the names of fajit.h's fajit_config), with .arch ("sm_80",
    "sm_90a", ...) and .dtype ("f16", "bf16") as names; the fields are read-only."""

    __slots__ = ("_c", "text")

    def __init__(self, c):
        self._c = c
        self.text = _format(c)

    def as_dict(self):
        """The fields as a plain dict (arch and dtype as names)."""
        return {f: getattr(self, f) for f in _config_fields()}

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"fajit.Config({self.text!r})"

    def __eq__(self, other):
        return isinstance(other, Config) and bytes(self._c) == bytes(other._c)

    def __hash__(self):
        return hash(bytes(self._c))


def _field_property(name):
    names = {"arch": ARCH_NAMES, "dtype": DTYPE_NAMES}.get(name)
    if names is not None:
        return property(lambda self: names.get(getattr(self._c, name), getattr(self._c, name)), doc=name)
    return property(lambda self: getattr(self._c, name), doc=f"fajit_config.{name}")


def _config_fields():
    return [f for f, _ in Config_c._fields_]


for _f in _config_fields():  # one read-only property per field of fajit_config, as fajit.h has them
    setattr(Config, _f, _field_property(_f))


def _format(c):
    buf = ctypes.create_string_buffer(256)
    lib.fajit_config_format(ctypes.byref(c), buf, len(buf))
    return buf.value.decode()


def _parse_text(text):
    """The fajit_config written as canonical `text` (not yet checked); ValueError when not in that form."""
    m = _TEXT.match(text)
    arch = {v: k for k, v in ARCH_NAMES.items()}.get(m.group(1)) if m else None
    if not m or arch is None:
        raise ValueError(f"config {text!r}: expected the canonical form '<sm_80|sm_90a|sm_100a> <f16|bf16|e4m3>[,kv=e4m3][,o=<f16|bf16>] d<D> "
                         "br<N> bc<N> s<N> sw<none|N> w<N> [cw<N>] [ov] [pp] [roll] [lpt] [xt] [acc] <causal|noncausal> "
                         "[win] [cap] [sink] [alibi] [chunk]'")
    c = Config_c()
    names = {v: k for k, v in DTYPE_NAMES.items()}
    c.arch, c.dtype = arch, names[m.group(2)]
    extra = m.group(3)  # ",kv=e4m3" / ",o=f16" (fajit.h: kv_dtype, out_dtype), written when not the default
    if extra:
        c.kv_dtype = names["e4m3"] if ",kv=" in extra else 0
        c.out_dtype = names[extra.split(",o=")[1]] if ",o=" in extra else 0
    c.head_dim, c.block_m, c.block_n, c.stages = (int(m.group(i)) for i in (4, 5, 6, 7))
    c.swizzle = -1 if m.group(8) == "none" else int(m.group(8))
    c.warps, c.col_warps = int(m.group(9)), int(m.group(10) or 1)
    c.overlap, c.pingpong = (1 if m.group(11) else -1), (1 if m.group(12) else -1)
    c.roll = 1 if m.group(13) else 0  # written only when 1 (absent: 0, the default)
    c.sched = 1 if m.group(14) else 0  # likewise (fajit.h: sched, the lpt schedule)
    c.cross_tile = 1 if m.group(15) else 0  # likewise (fajit.h: cross_tile)
    c.accurate = 1 if m.group(16) else 0  # likewise (fajit.h: accurate)
    c.causal = int(m.group(17) == "causal")
    words = m.group(18).split()
    if len(set(words)) != len(words):
        raise ValueError(f"config {text!r}: a variant word is repeated")
    c.mods = sum(_MOD_WORDS[w] for w in words)
    return c


# ---- arguments --------------------------------------------------------------------------------------
def dtype_code(dtype, arg="dtype"):
    """FAJIT_DTYPE_* of a dtype given as "bf16" / "f16" (and aliases) or a torch dtype; None = AUTO."""
    if dtype is None:
        return DTYPE["FAJIT_DTYPE_AUTO"]
    name = _DTYPE_ALIASES.get(str(dtype).lower())
    if name is None:
        raise TypeError(f"{arg}: {dtype!r} is not supported "
                        "(bf16, f16 or e4m3: 'bf16', 'f16', 'e4m3', torch.bfloat16, torch.float16, torch.float8_e4m3fn)")
    return {v: k for k, v in DTYPE_NAMES.items()}[name]


def _arch_code(arch):
    if arch is None:
        return ARCH["FAJIT_ARCH_AUTO"]
    codes = {**{v: k for k, v in ARCH_NAMES.items()}, **{str(k): k for k in ARCH_NAMES}}
    if isinstance(arch, int) and arch in ARCH_NAMES:
        return arch
    if str(arch) in codes:
        return codes[str(arch)]
    raise ValueError(f"arch: {arch!r}: must be one of {', '.join(ARCH_NAMES.values())} (or None: the device's)")


def _tri(value, arg):
    """True / False / None -> 1 / -1 / 0 (on / off / pick), as fajit_config's overlap and pingpong. (False is
    tested before 0: False == 0 in Python, and False must mean off, not pick.)"""
    if value is False or value == -1:
        return -1
    if value is None or value == 0:
        return 0
    if value is True or value == 1:
        return 1
    raise ValueError(f"{arg}: {value!r}: must be True, False or None (pick)")


def _count(value, arg):
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{arg}: expected an int (or None to pick), got {type(value).__name__}")
    return value


def device_index(device):
    """CUDA device ordinal of `device`: None -> -1 (no device), an int, "cuda[:N]", or a torch.device."""
    if device is None:
        return -1
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    dtype, index = getattr(device, "type", None), getattr(device, "index", None)
    if dtype is None and isinstance(device, str):
        m = re.match(r"^cuda(?::(\d+))?$", device)
        dtype, index = ("cuda", int(m.group(1)) if m.group(1) else None) if m else (None, None)
    if dtype != "cuda":
        raise ValueError(f"device: {device!r}: expected a CUDA device (an int, 'cuda', 'cuda:N' or a torch.device)")
    if index is None:
        torch = sys.modules.get("torch")
        index = torch.cuda.current_device() if torch is not None else 0
    return index


def _shape(shape):
    if shape is None:
        return None
    names = [f for f, _ in Shape_c._fields_]
    if isinstance(shape, dict):
        unknown = set(shape) - set(names)
        if unknown:
            raise ValueError(f"shape: unknown keys {sorted(unknown)} (known: {', '.join(names)})")
        return Shape_c(**{k: _count(v, f"shape[{k!r}]") for k, v in shape.items()})
    if len(shape) > len(names):
        raise ValueError(f"shape: {shape!r}: at most {len(names)} values ({', '.join(names)})")
    return Shape_c(*(_count(v, f"shape[{i}]") for i, v in enumerate(shape)))


def _sched(value):
    """"lpt" / "static" / None -> 1 / -1 / 0 (fajit_config.sched; 0: the heuristic's pick when filled)."""
    codes = {None: 0, "lpt": 1, "static": -1}
    if value not in codes:
        raise ValueError(f"sched: {value!r}: must be 'lpt', 'static' or None (pick)")
    return codes[value]


def _fields_c(*, head_dim=None, dtype=None, arch=None, causal=False, block_m=None, block_n=None, stages=None,
              swizzle=None, warps=None, col_warps=None, overlap=None, pingpong=None, roll=None, sched=None,
              cross_tile=None, accurate=None):
    """A fajit_config of these fields, the others 0 (neither filled nor checked)."""
    if head_dim is None:
        raise ValueError("head_dim: required (64, 96, 128, 192 or 256), or pass a config's canonical text")
    c = Config_c()
    c.arch, c.dtype, c.head_dim = _arch_code(arch), dtype_code(dtype), _count(head_dim, "head_dim")
    c.block_m, c.block_n = _count(block_m, "block_m"), _count(block_n, "block_n")
    c.stages, c.warps, c.col_warps = _count(stages, "stages"), _count(warps, "warps"), _count(col_warps, "col_warps")
    c.swizzle = -1 if swizzle == "none" else _count(swizzle, "swizzle")
    c.causal, c.overlap, c.pingpong = int(bool(causal)), _tri(overlap, "overlap"), _tri(pingpong, "pingpong")
    c.roll = _tri(roll, "roll")
    c.sched = _sched(sched)
    c.cross_tile = _tri(cross_tile, "cross_tile")
    c.accurate = _tri(accurate, "accurate")
    return c


def make_config(spec=None, *, head_dim=None, dtype=None, arch=None, causal=False, block_m=None, block_n=None,
                stages=None, swizzle=None, warps=None, col_warps=None, overlap=None, pingpong=None, roll=None,
                sched=None, cross_tile=None, accurate=None, shape=None, device=None, fill=True):
    """The Config these arguments describe, filled (fill=True) or only checked; see fajit.config."""
    if spec is not None:
        given = [n for n, x in (("head_dim", head_dim), ("dtype", dtype), ("arch", arch), ("block_m", block_m),
                                ("block_n", block_n), ("stages", stages), ("swizzle", swizzle), ("warps", warps),
                                ("col_warps", col_warps), ("overlap", overlap), ("pingpong", pingpong),
                                ("roll", roll), ("sched", sched), ("cross_tile", cross_tile), ("accurate", accurate), ("shape", shape), ("device", device)) if x is not None] + (["causal"] if causal else [])
        if given:
            raise TypeError(f"config given as {spec!r}: the fields {', '.join(given)} must not be given with it")
        c = spec._c if isinstance(spec, Config) else _parse_text(spec) if isinstance(spec, str) else None
        if c is None:
            raise TypeError(f"config: expected a fajit.Config or its canonical text, got {type(spec).__name__}")
        c = Config_c.from_buffer_copy(c)
        check(lib.fajit_config_check(ctypes.byref(c)))
        return Config(c)
    c = _fields_c(head_dim=head_dim, dtype=dtype, arch=arch, causal=causal, block_m=block_m, block_n=block_n,
                  stages=stages, swizzle=swizzle, warps=warps, col_warps=col_warps, overlap=overlap, pingpong=pingpong,
                  roll=roll, sched=sched, cross_tile=cross_tile, accurate=accurate)
    if fill:
        dev = device_index(device)
        ctx = _lib.context(dev).handle if dev >= 0 else None
        sh = _shape(shape)
        check(lib.fajit_config_fill(ctx, ctypes.byref(sh) if sh is not None else None, ctypes.byref(c)))
    else:
        check(lib.fajit_config_check(ctypes.byref(c)))
    return Config(c)


# ---- code --------------------------------------------------------------------------------------------
def ptx(spec=None, *, verbosity=0, **kw):
    """PTX text of a config; see fajit.ptx."""
    if verbosity not in (0, 1, 2):
        raise ValueError(f"verbosity: {verbosity!r}: must be 0, 1 or 2")
    c = make_config(spec, **kw)._c
    p, n = ctypes.c_void_p(), ctypes.c_size_t()
    check(lib.fajit_generate_ptx(ctypes.byref(c), verbosity, ctypes.byref(p), ctypes.byref(n)))
    return _lib.take_text(p, n.value)


def explain(spec=None, **kw):
    """The plan of a config in words; see fajit.explain."""
    c = make_config(spec, **kw)._c
    p = ctypes.c_void_p()
    check(lib.fajit_explain(ctypes.byref(c), ctypes.byref(p)))
    return _lib.take_text(p)


def cache_dir(device=None):
    """The disk-cache directory ("" when it is off); see fajit.cache_dir."""
    return _lib.context(device_index(device)).cache_dir


# ---- tune --------------------------------------------------------------------------------------------
class TuneResult:
    """What fajit.tune found: .best (Config), .tflops, .median_ms, .seqlen_class, .heuristic_tflops,
    .space, .pruned, .candidates, .timed, .skipped, .seconds, .saved (fajit_tune_result's fields)."""

    def __init__(self, r):
        for f, _ in type(r)._fields_:
            setattr(self, f, Config(Config_c.from_buffer_copy(r.best)) if f == "best" else getattr(r, f))

    def __repr__(self):
        return f"fajit.TuneResult(best={self.best.text!r}, tflops={self.tflops:.1f}, timed={self.timed})"


def tune(head_dim, *, dtype="bf16", causal=False, shape=None, device=None, max_candidates=0, time_budget_s=0.0,
         reps=0, warmup=0, persist=True, progress=None):
    """Time the configs of one problem class and keep the fastest; see fajit.tune."""
    dev = device_index(device if device is not None else "cuda")
    opts = lib.fajit_tune_options_default()
    opts.max_candidates, opts.reps, opts.warmup = _count(max_candidates, "max_candidates"), _count(reps, "reps"), \
        _count(warmup, "warmup")
    if not (isinstance(time_budget_s, (int, float)) and math.isfinite(time_budget_s) and time_budget_s >= 0):
        raise ValueError(f"time_budget_s: {time_budget_s!r}: must be a finite number >= 0 (0 = no limit)")
    opts.time_budget_s, opts.persist = float(time_budget_s), int(bool(persist))
    cb = None
    if progress is not None:
        def cb_impl(_user, index, total, cfg_p, tflops, note):
            cfg = Config(Config_c.from_buffer_copy(cfg_p.contents)) if cfg_p else None
            progress(index, total, cfg, tflops, note.decode(errors="replace") if note else "")
        cb = _lib.ProgressFn(cb_impl)  # kept alive until fajit_tune returns
        opts.progress = cb
    sh = _shape(shape)
    best, res = Config_c(), _lib.TuneResult_c()
    ctx = _lib.context(dev)
    try:
        check(lib.fajit_tune(ctx.handle, ctypes.byref(sh) if sh is not None else None, dtype_code(dtype),
                             _count(head_dim, "head_dim"), int(bool(causal)), ctypes.byref(opts), ctypes.byref(best),
                             ctypes.byref(res)))
    finally:  # a winner changes the kernel a shape gets, so its decode tile and split count (and workspace)
        ctx.choices_changed()
    del cb
    return TuneResult(res)


# ---- warm --------------------------------------------------------------------------------------------
class WarmResult:
    """What fajit.warm did: .total (distinct kernels), .compiled, .cached, .failed, .threads, .seconds."""

    def __init__(self, r):
        for f, _ in type(r)._fields_:
            setattr(self, f, getattr(r, f))

    def __repr__(self):
        return (f"fajit.WarmResult(total={self.total}, compiled={self.compiled}, cached={self.cached}, "
                f"failed={self.failed}, threads={self.threads}, seconds={self.seconds:.2f})")


def _warm_config(i, spec):
    if isinstance(spec, dict):
        try:
            return _fields_c(**spec)
        except TypeError as e:
            raise TypeError(f"configs[{i}]: {e}") from None
    if isinstance(spec, Config):
        return Config_c.from_buffer_copy(spec._c)
    if isinstance(spec, str):
        try:
            return _parse_text(spec)
        except ValueError as e:
            raise ValueError(f"configs[{i}]: {e}") from None
    raise TypeError(f"configs[{i}]: expected a fajit.Config, its canonical text or a dict of fajit.config's fields, "
                    f"got {type(spec).__name__}")


def warm(configs, *, shapes=None, device=None, sm=None, threads=0, progress=None):
    """Compile many kernels at once (fajit_warm); see fajit.warm."""
    if isinstance(configs, (str, dict, Config)):
        configs = [configs]
    configs = list(configs)
    n = len(configs)
    arr = (Config_c * max(n, 1))()
    for i, spec in enumerate(configs):
        arr[i] = _warm_config(i, spec)
    sh_arr = None
    if shapes is not None:
        one = isinstance(shapes, dict) or (isinstance(shapes, (tuple, list)) and shapes and
                                           isinstance(shapes[0], int) and not isinstance(shapes[0], bool))
        shapes = [shapes] * n if one else list(shapes)
        if len(shapes) != n:
            raise ValueError(f"shapes: {len(shapes)} shapes for {n} configs: give one shape, or one per config")
        sh_arr = (Shape_c * max(n, 1))(*[_shape(s) for s in shapes])
    if sm is not None and not isinstance(sm, str):
        raise TypeError(f"sm: {sm!r}: expected a GPU name such as 'sm_90a' or 'sm_80'")
    dev = device_index(device if device is not None else (None if sm is not None else "cuda"))
    opts = lib.fajit_warm_options_default()
    opts.threads = _count(threads, "threads")
    opts.sm = sm.encode() if sm is not None else None
    cb = None
    if progress is not None:
        def cb_impl(_user, done, total, _index, cfg_p, status, note):
            cfg = Config(Config_c.from_buffer_copy(cfg_p.contents)) if cfg_p else None
            progress(done, total, cfg, status == _lib.OK, note.decode(errors="replace") if note else "")
        cb = _lib.WarmProgressFn(cb_impl)  # kept alive until fajit_warm returns
        opts.progress = cb
    res = _lib.WarmResult_c()
    ctx = _lib.context(dev)
    check(lib.fajit_warm(ctx.handle, arr, sh_arr, n, ctypes.byref(opts), ctypes.byref(res)))
    del cb
    return WarmResult(res)
