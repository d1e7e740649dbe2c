"""fajit_ctypes.py - a small ctypes binding over libfajit.so, for benchmarks and experiments from Python.

Mirrors the structs of include/fajit.h (keep them in sync) and wraps the calls a benchmark needs:

    import torch
    from fajit_ctypes import Fajit
    fa = Fajit("build/libfajit.so")                # context on the current CUDA device (torch's primary context)
    q = torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16); k = torch.randn_like(q); v = torch.randn_like(q)
    o, lse = fa.forward(q, k, v, causal=True, want_lse=True)   # layout "bhnd" ([B,H,N,D]) or "bnhd" ([B,N,H,D])

Tensors are passed by data_ptr() with their element strides (the last dim must be contiguous), on
torch's current stream. Every failing library call raises FajitError with the library's message.
Lower-level pieces: Fajit.config_fill(), Fajit.config_check(), Fajit.kernel(), Fajit.generate_ptx(),
Fajit.make_args() + Fajit.forward_args() (the cheapest call, for timing loops), Config (with
Config.from_text() for the canonical text), Args.

Code generation needs no GPU and no torch: Fajit(device=-1) makes a context without a device, on which
config_fill, config_check, config_text and generate_ptx work.
"""
import ctypes
import os
import re

# ---- enums (include/fajit.h) ----------------------------------------------------------------------
DTYPE_AUTO, DTYPE_F16, DTYPE_BF16 = 0, 1, 2
ARCH_AUTO, ARCH_SM80, ARCH_SM90A, ARCH_SM100A = 0, 80, 90, 100
SWIZZLE_NONE = -1
SOURCE_NAMES = {0: "memory", 1: "disk", 2: "compiled"}
DTYPE_NAMES = {DTYPE_F16: "f16", DTYPE_BF16: "bf16"}
ARCH_NAMES = {ARCH_SM80: "sm_80", ARCH_SM90A: "sm_90a", ARCH_SM100A: "sm_100a"}


class FajitError(RuntimeError):
    """A fajit call failed: .status is the fajit_status, the text is fajit_errmsg()."""

    def __init__(self, status, name, message):
        super().__init__(f"{name}: {message}")
        self.status = status


# ---- structs (include/fajit.h) ---------------------------------------------------------------------
class Config(ctypes.Structure):
    """fajit_config: fields left 0 are chosen by config_fill."""
    _fields_ = [("arch", ctypes.c_int), ("dtype", ctypes.c_int), ("head_dim", ctypes.c_int),
                ("block_m", ctypes.c_int), ("block_n", ctypes.c_int), ("stages", ctypes.c_int),
                ("swizzle", ctypes.c_int), ("warps", ctypes.c_int), ("causal", ctypes.c_int),
                ("col_warps", ctypes.c_int), ("overlap", ctypes.c_int), ("pingpong", ctypes.c_int)]

    # canonical text, as fajit_config_format writes it: "sm_80 bf16 d128 br64 bc64 s2 sw128 w4 noncausal"
    # ("cw2" after the warps when col_warps > 1; "ov" / "pp" when the sm_90a schedule flags are on)
    _TEXT = re.compile(r"^\s*(sm_\w+)\s+(f16|bf16)\s+d(\d+)\s+br(\d+)\s+bc(\d+)\s+s(\d+)\s+sw(none|\d+)"
                       r"\s+w(\d+)(?:\s+cw(\d+))?(\s+ov)?(\s+pp)?\s+(causal|noncausal)\s*$")

    @classmethod
    def from_text(cls, text):
        """The Config written as `text` by fajit_config_format (the inverse of Fajit.config_text).
        Raises ValueError, naming the text, when it is not in that form. Not checked: see config_check."""
        m = cls._TEXT.match(text)
        arch = {v: k for k, v in ARCH_NAMES.items()}.get(m.group(1)) if m else None
        if not m or arch is None:
            raise ValueError(f"config {text!r}: expected the canonical form "
                             "'<sm_80|sm_90a|sm_100a> <f16|bf16> d<D> br<N> bc<N> s<N> sw<none|N> w<N> [cw<N>] [ov] [pp] "
                             "<causal|noncausal>'")
        sw = SWIZZLE_NONE if m.group(7) == "none" else int(m.group(7))
        return cls(arch=arch, dtype=DTYPE_F16 if m.group(2) == "f16" else DTYPE_BF16, head_dim=int(m.group(3)),
                   block_m=int(m.group(4)), block_n=int(m.group(5)), stages=int(m.group(6)), swizzle=sw,
                   warps=int(m.group(8)), col_warps=int(m.group(9) or 1), overlap=1 if m.group(10) else -1,
                   pingpong=1 if m.group(11) else -1, causal=int(m.group(12) == "causal"))

    def as_dict(self):
        """The fields as a plain dict (for JSON)."""
        return {name: getattr(self, name) for name, _ in self._fields_}


class Shape(ctypes.Structure):
    """fajit_shape: the problem a config is chosen for (zeros = unknown)."""
    _fields_ = [("batch", ctypes.c_int), ("heads_q", ctypes.c_int), ("heads_kv", ctypes.c_int),
                ("seqlen_q", ctypes.c_int), ("seqlen_k", ctypes.c_int)]


class ContextOptions(ctypes.Structure):
    """fajit_context_options: device ordinal (-1 = none), disk cache (-1 = from env, 0 off, 1 on), cache dir."""
    _fields_ = [("device", ctypes.c_int), ("disk_cache", ctypes.c_int), ("cache_dir", ctypes.c_char_p)]


class KernelInfo(ctypes.Structure):
    """fajit_kernel_info: registers per thread, dynamic smem per CTA, threads per CTA, spill bytes, cubin size."""
    _fields_ = [("registers", ctypes.c_int), ("smem_bytes", ctypes.c_int), ("threads", ctypes.c_int),
                ("spill_bytes", ctypes.c_int), ("cubin_bytes", ctypes.c_size_t)]


Strides3 = ctypes.c_int64 * 3


class Args(ctypes.Structure):
    """fajit_attention_args: device pointers are plain integers, strides are in elements."""
    _fields_ = [("dtype", ctypes.c_int), ("batch", ctypes.c_int), ("heads_q", ctypes.c_int),
                ("heads_kv", ctypes.c_int), ("seqlen_q", ctypes.c_int), ("seqlen_k", ctypes.c_int),
                ("head_dim", ctypes.c_int),
                ("q", ctypes.c_uint64), ("k", ctypes.c_uint64), ("v", ctypes.c_uint64), ("o", ctypes.c_uint64),
                ("lse", ctypes.c_uint64),
                ("q_stride", Strides3), ("k_stride", Strides3), ("v_stride", Strides3), ("o_stride", Strides3),
                ("softmax_scale", ctypes.c_float), ("causal", ctypes.c_int), ("stream", ctypes.c_void_p),
                # the grown fields (fajit.h): the library reads past `stream`, so they must be here; zeros (what
                # ctypes gives) mean struct_size 0 = this layout, no per-sequence lengths, heuristic splits
                ("struct_size", ctypes.c_size_t), ("seqlens_k", ctypes.c_uint64), ("num_splits", ctypes.c_int),
                ("reserved0", ctypes.c_int), ("workspace", ctypes.c_uint64), ("workspace_bytes", ctypes.c_size_t)]


def _declare(lib):
    """Set restype/argtypes of every function used here (ctypes would otherwise assume int everywhere)."""
    P, c_int, c_char_p = ctypes.POINTER, ctypes.c_int, ctypes.c_char_p
    sigs = {
        "fajit_version": (c_char_p, []),
        "fajit_status_name": (c_char_p, [c_int]),
        "fajit_errmsg": (c_char_p, []),
        "fajit_free": (None, [ctypes.c_void_p]),
        "fajit_context_options_default": (ContextOptions, []),
        "fajit_context_create": (c_int, [P(ContextOptions), P(ctypes.c_void_p)]),
        "fajit_context_destroy": (None, [ctypes.c_void_p]),
        "fajit_context_sm": (c_char_p, [ctypes.c_void_p]),
        "fajit_context_cache_dir": (c_char_p, [ctypes.c_void_p]),
        "fajit_config_fill": (c_int, [ctypes.c_void_p, P(Shape), P(Config)]),
        "fajit_config_check": (c_int, [P(Config)]),
        "fajit_config_format": (c_int, [P(Config), ctypes.c_char_p, ctypes.c_size_t]),
        "fajit_generate_ptx": (c_int, [P(Config), c_int, P(ctypes.c_void_p), P(ctypes.c_size_t)]),
        "fajit_kernel_get": (c_int, [ctypes.c_void_p, P(Config), P(ctypes.c_void_p), P(c_int)]),
        "fajit_kernel_get_info": (c_int, [ctypes.c_void_p, P(KernelInfo)]),
        "fajit_attention_forward": (c_int, [ctypes.c_void_p, P(Args), P(Config)]),
        "fajit_last_forward": (c_char_p, []),
    }
    for name, (res, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, argtypes


def find_library(path=None):
    """path, else $FAJIT_LIB, else build/libfajit.so next to this file's repository."""
    candidates = [path, os.environ.get("FAJIT_LIB"),
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "libfajit.so")]
    for c in candidates:
        if c and os.path.exists(c):
            return os.path.abspath(c)
    raise FileNotFoundError("libfajit.so not found: pass its path, set FAJIT_LIB, or build into ./build")


def config_text(lib, cfg):
    """Canonical text of a Config (fajit_config_format) through a loaded library handle."""
    buf = ctypes.create_string_buffer(160)
    lib.fajit_config_format(ctypes.byref(cfg), buf, len(buf))
    return buf.value.decode()


class Fajit:
    """One fajit_context bound to a CUDA device (torch's current device unless given; -1 = no device).

    lib_path: libfajit.so (see find_library). disk_cache: -1 = from $FAJIT_CACHE, 0 = off, 1 = on.
    cache_dir: None = $FAJIT_CACHE_DIR, else $XDG_CACHE_HOME/fajit, else ~/.cache/fajit.
    Raises FajitError (FAJIT_ERR_LIBRARY_MISSING, FAJIT_ERR_NO_DEVICE, ...) when the context cannot be made.
    """

    def __init__(self, lib_path=None, device=None, disk_cache=-1, cache_dir=None):
        self.lib = ctypes.CDLL(find_library(lib_path))
        _declare(self.lib)
        if device is None:
            import torch
            device = torch.cuda.current_device()
        opts = self.lib.fajit_context_options_default()
        opts.device, opts.disk_cache = device, disk_cache
        self._cache_dir = cache_dir.encode() if cache_dir else None  # keep the bytes alive
        opts.cache_dir = self._cache_dir
        self.ctx = ctypes.c_void_p()
        self._check(self.lib.fajit_context_create(ctypes.byref(opts), ctypes.byref(self.ctx)))
        self.device = device

    def close(self):
        """Destroy the context (its kernels go with it). Safe to call twice; also done by `with` and __del__."""
        if self.ctx:
            self.lib.fajit_context_destroy(self.ctx)
            self.ctx = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- helpers ---------------------------------------------------------------------------------
    def _check(self, status):
        """Raise FajitError with the library's message unless status is FAJIT_OK."""
        if status != 0:
            raise FajitError(status, self.lib.fajit_status_name(status).decode(), self.lib.fajit_errmsg().decode())

    @property
    def version(self):
        """Version string of the loaded libfajit, e.g. "0.1.0"."""
        return self.lib.fajit_version().decode()

    @property
    def sm(self):
        """The device's sm name ("sm_90", ...), "" without a device."""
        return self.lib.fajit_context_sm(self.ctx).decode()

    @property
    def cache_dir(self):
        """Where this context's disk cache lives ("" when it is off)."""
        return self.lib.fajit_context_cache_dir(self.ctx).decode()

    def config_fill(self, cfg, shape=None):
        """Fill the zero fields of a Config (in place) with the heuristic's choice for this context's GPU
        and checks the result; returns it. shape: (batch, heads_q, heads_kv, seqlen_q, seqlen_k) or None."""
        sh = ctypes.byref(Shape(*shape)) if shape else None
        self._check(self.lib.fajit_config_fill(self.ctx, sh, ctypes.byref(cfg)))
        return cfg

    def config_check(self, cfg):
        """Raise FajitError (FAJIT_ERR_INVALID_CONFIG, with the rule and its arithmetic) unless cfg is valid."""
        self._check(self.lib.fajit_config_check(ctypes.byref(cfg)))
        return cfg

    def config_text(self, cfg):
        """Canonical text of a Config, e.g. "sm_80 bf16 d128 br128 bc64 s2 sw128 w8 noncausal"."""
        return config_text(self.lib, cfg)

    def kernel(self, cfg):
        """Load (or find) the kernel of a filled config: returns (KernelInfo, source name)."""
        k, src, info = ctypes.c_void_p(), ctypes.c_int(), KernelInfo()
        self._check(self.lib.fajit_kernel_get(self.ctx, ctypes.byref(cfg), ctypes.byref(k), ctypes.byref(src)))
        self._check(self.lib.fajit_kernel_get_info(k, ctypes.byref(info)))
        return info, SOURCE_NAMES.get(src.value, str(src.value))

    def generate_ptx(self, cfg, verbosity=0):
        """PTX text of a checked Config (verbosity 0..2, as fagen ptx -v). Needs no GPU."""
        ptr, n = ctypes.c_void_p(), ctypes.c_size_t()
        self._check(self.lib.fajit_generate_ptx(ctypes.byref(cfg), verbosity, ctypes.byref(ptr), ctypes.byref(n)))
        text = ctypes.string_at(ptr, n.value).decode()
        self.lib.fajit_free(ptr)
        return text

    # ---- forward ---------------------------------------------------------------------------------
    @staticmethod
    def _dims(t, layout):
        """(B, H, N, D) and element strides (batch, head, seq) of a 4-d tensor in `layout`."""
        if t.dim() != 4 or t.stride(3) != 1:
            raise ValueError(f"expected a 4-d tensor with a contiguous last dim, got shape {tuple(t.shape)} "
                             f"strides {t.stride()}")
        if layout == "bhnd":
            return (t.shape[0], t.shape[1], t.shape[2], t.shape[3]), (t.stride(0), t.stride(1), t.stride(2))
        if layout == "bnhd":
            return (t.shape[0], t.shape[2], t.shape[1], t.shape[3]), (t.stride(0), t.stride(2), t.stride(1))
        raise ValueError(f"layout {layout!r}: must be 'bhnd' or 'bnhd'")

    def make_args(self, q, k, v, o, lse=None, causal=False, scale=0.0, layout="bhnd", stream=None):
        """An Args for torch tensors (no copies): the shapes and strides are read from the tensors."""
        import torch
        dtypes = {torch.float16: DTYPE_F16, torch.bfloat16: DTYPE_BF16}
        if q.dtype not in dtypes or not (q.dtype == k.dtype == v.dtype == o.dtype):
            raise ValueError(f"q, k, v, o must all be float16 or bfloat16 (got {q.dtype}, {k.dtype}, {v.dtype}, {o.dtype})")
        (b, hq, nq, d), qs = self._dims(q, layout)
        (_, hkv, nk, _), ks = self._dims(k, layout)
        _, vs = self._dims(v, layout)
        _, os_ = self._dims(o, layout)
        a = Args()
        a.dtype, a.batch, a.heads_q, a.heads_kv = dtypes[q.dtype], b, hq, hkv
        a.seqlen_q, a.seqlen_k, a.head_dim = nq, nk, d
        a.q, a.k, a.v, a.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
        a.lse = lse.data_ptr() if lse is not None else 0
        a.q_stride, a.k_stride, a.v_stride, a.o_stride = Strides3(*qs), Strides3(*ks), Strides3(*vs), Strides3(*os_)
        a.softmax_scale, a.causal = scale, int(bool(causal))
        if stream is None:
            stream = torch.cuda.current_stream(q.device).cuda_stream
        a.stream = stream
        return a

    def last_forward(self):
        """What the calling thread's last forward launched: the config's canonical text, and
        "; fell back from sm_90a: <why>" when the TMA path could not take the tensors."""
        return self.lib.fajit_last_forward().decode()

    def forward_args(self, args, cfg=None):
        """Launch with a prepared Args (the lowest-overhead call, for timing loops)."""
        self._check(self.lib.fajit_attention_forward(self.ctx, ctypes.byref(args),
                                                     ctypes.byref(cfg) if cfg is not None else None))

    def forward(self, q, k, v, out=None, lse=None, causal=False, scale=0.0, layout="bhnd", want_lse=False,
                cfg=None, stream=None):
        """O (and LSE, fp32 [B, Hq, Nq], when want_lse or lse is given) of attention over torch tensors.
        Asynchronous on torch's current stream, like any torch op. Returns (out, lse or None)."""
        import torch
        if out is None:
            out = torch.empty_like(q)
        if lse is None and want_lse:
            (b, hq, nq, _), _ = self._dims(q, layout)
            lse = torch.empty(b, hq, nq, device=q.device, dtype=torch.float32)
        self.forward_args(self.make_args(q, k, v, out, lse, causal, scale, layout, stream), cfg)
        return out, lse
