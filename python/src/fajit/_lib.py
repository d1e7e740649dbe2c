"""_lib.py - libfajit.so loaded with ctypes, its declarations read from fajit.h, errors, and contexts.

Where the library and header come from:
  - installed package (pip install ./python): fajit/libfajit.so and fajit/include/fajit.h, from one build;
  - source tree (PYTHONPATH=python/src): <repo>/build/libfajit.so and <repo>/include/fajit.h;
  - $FAJIT_LIB names another libfajit.so (the header is still the package's, else the source tree's).
Nothing here imports torch or touches a GPU: contexts are created on first use, one per CUDA device
(and one without a device, for cache paths), and live until the process ends.
"""
import ctypes
import os
import threading
from pathlib import Path

from . import _header


class FajitError(RuntimeError):
    """A libfajit call failed. .status (int), .status_name ("FAJIT_ERR_INVALID_CONFIG", ...) and
    .message (fajit_errmsg(): the field, the value and the rule) say why; str() is "name: message"."""

    def __init__(self, status, status_name, message):
        super().__init__(f"{status_name}: {message}")
        self.status, self.status_name, self.message = status, status_name, message


class FajitInputError(FajitError, ValueError):
    """A FajitError meaning the input was wrong (FAJIT_ERR_INVALID_ARGUMENT, FAJIT_ERR_INVALID_CONFIG);
    also a ValueError."""


def _paths():
    here = Path(__file__).resolve().parent
    repo = here.parents[2]  # python/src/fajit -> the repository, when run from the source tree
    header = next((p for p in (here / "include" / "fajit.h", repo / "include" / "fajit.h") if p.is_file()), None)
    env = os.environ.get("FAJIT_LIB")
    lib = Path(env) if env else next((p for p in (here / "libfajit.so", repo / "build" / "libfajit.so")
                                      if p.is_file()), None)
    if header is None:
        raise ImportError(f"fajit: no fajit.h in {here / 'include'} or {repo / 'include'}")
    if lib is None or not lib.is_file():
        raise ImportError(f"fajit: libfajit.so not found ({'$FAJIT_LIB=' + env if env else here / 'libfajit.so'}); "
                          "install the package with `pip install ./python`, or build ./build and run from the "
                          "source tree")
    return lib, header


LIB_PATH, HEADER_PATH = _paths()
H = _header.load(HEADER_PATH)
lib = ctypes.CDLL(str(LIB_PATH))
UNDECLARED = H.declare(lib)  # prototypes this binding could not mirror: name -> reason

Config_c = H.structs["fajit_config"]
Shape_c = H.structs["fajit_shape"]
ContextOptions_c = H.structs["fajit_context_options"]
KernelInfo_c = H.structs["fajit_kernel_info"]
Args_c = H.structs["fajit_attention_args"]
TuneOptions_c = H.structs["fajit_tune_options"]
TuneResult_c = H.structs["fajit_tune_result"]
ProgressFn = H.callbacks["fajit_tune_progress_fn"]
WarmResult_c = H.structs["fajit_warm_result"]
WarmProgressFn = H.callbacks["fajit_warm_progress_fn"]

STATUS = H.enums["fajit_status"]
DTYPE = H.enums["fajit_dtype"]  # FAJIT_DTYPE_AUTO / _F16 / _BF16
ARCH = H.enums["fajit_arch"]
OK = STATUS["FAJIT_OK"]
_INPUT_ERRORS = (STATUS["FAJIT_ERR_INVALID_ARGUMENT"], STATUS["FAJIT_ERR_INVALID_CONFIG"])


def fn(name):
    """The library function `name`, refused with the reason when fajit.h declares it in a form this
    binding does not mirror, or the loaded library lacks it."""
    if name in UNDECLARED:
        raise FajitError(-1, "FAJIT_PYTHON_BINDING", UNDECLARED[name])
    return getattr(lib, name)


def error(status):
    """The FajitError for a failed call's status (the calling thread's fajit_errmsg())."""
    name = lib.fajit_status_name(status).decode()
    cls = FajitInputError if status in _INPUT_ERRORS else FajitError
    return cls(status, name, lib.fajit_errmsg().decode(errors="replace"))


def check(status):
    """Raise the FajitError of `status` unless it is FAJIT_OK."""
    if status != OK:
        raise error(status)


def take_text(ptr, length=None):
    """A library-allocated NUL-terminated buffer as str; the buffer is released (fajit_free)."""
    try:
        return ctypes.string_at(ptr, length).decode() if length is not None else ctypes.string_at(ptr).decode()
    finally:
        lib.fajit_free(ptr)


class Context:
    """One fajit_context: a CUDA device's (index >= 0; its primary context, the one torch uses) or none
    (-1: configs, code and cache paths only). Get them through context(); they are never destroyed."""

    def __init__(self, device):
        opts = lib.fajit_context_options_default()
        opts.device = device
        handle = ctypes.c_void_p()
        check(lib.fajit_context_create(ctypes.byref(opts), ctypes.byref(handle)))
        self.handle, self.device = handle, device
        self.workspace_sizes = {}  # split-KV workspace bytes per shape key (fajit._torch)
        self.generation = 0  # bumped when the library's kernel choices may have changed (choices_changed)

    def choices_changed(self):
        """The library's choices for this context may differ from here on (fajit.tune filed a winner): the
        split-KV workspace sizes cached for it are dropped, and fajit._torch's plans ask again."""
        self.workspace_sizes = {}
        self.generation += 1

    @property
    def sm(self):
        """The device's sm name ("sm_90", ...), "" without a device."""
        return lib.fajit_context_sm(self.handle).decode()

    @property
    def cache_dir(self):
        """This context's disk-cache directory ("" when the disk cache is off)."""
        return lib.fajit_context_cache_dir(self.handle).decode()

    @property
    def tune_file(self):
        """This context's tune file ("" when the disk cache is off)."""
        return lib.fajit_context_tune_file(self.handle).decode()

    def kernel_info(self, cfg_c):
        """Get (load or compile) the kernel of a filled fajit_config: (registers, smem, threads, spill
        bytes, cubin bytes) as a dict, and where it came from ("memory", "disk", "compiled")."""
        k, src, info = ctypes.c_void_p(), ctypes.c_int(), KernelInfo_c()
        check(lib.fajit_kernel_get(self.handle, ctypes.byref(cfg_c), ctypes.byref(k), ctypes.byref(src)))
        check(lib.fajit_kernel_get_info(k, ctypes.byref(info)))
        sources = {v: n[len("FAJIT_SOURCE_"):].lower() for n, v in H.enums["fajit_cache_source"].items()}
        return {f: getattr(info, f) for f, _ in KernelInfo_c._fields_}, sources.get(src.value, str(src.value))


_contexts = {}
_contexts_lock = threading.Lock()


def context(device):
    """The Context of CUDA device `device` (an int; -1 = no device), created on first use."""
    ctx = _contexts.get(device)
    if ctx is None:
        with _contexts_lock:
            ctx = _contexts.get(device)
            if ctx is None:
                ctx = _contexts[device] = Context(device)
    return ctx
