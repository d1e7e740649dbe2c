"""_header.py - the ctypes mirror of include/fajit.h, read from the header itself.

fajit.h is kept in a plain style (typedef'd enums and structs, one prototype per function, no macros in
declarations), so this module can read it without a C parser: comments and preprocessor lines are
dropped, then four kinds of declaration are recognised:

    typedef enum NAME { A = 0, B = 1, ... } NAME;         -> NAME: {"A": 0, ...}, values as c_int
    typedef struct NAME { T a, b; T c[3]; ... } NAME;    -> a ctypes.Structure with those fields, in order
    typedef struct NAME NAME;                            -> an opaque handle (a pointer to it is c_void_p)
    typedef R (*NAME)(T a, ...);                         -> a ctypes.CFUNCTYPE
    R fajit_name(T a, ...);                              -> a prototype (restype, argtypes)

and `#define NAME <integer or "string">` constants. A struct member or parameter whose type is not one of
the known scalar types, enums, structs, handles or callbacks raises HeaderError naming the declaration:
the binding never guesses a layout. The package ships the fajit.h its libfajit.so was built from, so the
two cannot disagree; python/tests/test_layout.py compiles a C program that prints sizeof and offsetof of
every struct field read here and compares them with ctypes.
"""
import ctypes
import re

_SCALARS = {
    "int": ctypes.c_int, "unsigned": ctypes.c_uint, "unsigned int": ctypes.c_uint, "long": ctypes.c_long,
    "unsigned long": ctypes.c_ulong, "long long": ctypes.c_longlong, "unsigned long long": ctypes.c_ulonglong,
    "short": ctypes.c_short, "unsigned short": ctypes.c_ushort, "char": ctypes.c_char,
    "float": ctypes.c_float, "double": ctypes.c_double, "size_t": ctypes.c_size_t,
    "int8_t": ctypes.c_int8, "uint8_t": ctypes.c_uint8, "int16_t": ctypes.c_int16, "uint16_t": ctypes.c_uint16,
    "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32, "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
}

_TYPEDEF_ENUM = re.compile(r"typedef\s+enum\s+\w*\s*\{([^}]*)\}\s*(\w+)\s*;")
_TYPEDEF_STRUCT = re.compile(r"typedef\s+struct\s+\w*\s*\{([^{}]*)\}\s*(\w+)\s*;")
_NESTED = re.compile(r"typedef\s+struct\s+(\w*)\s*\{[^{}]*\{")
_TYPEDEF_OPAQUE = re.compile(r"typedef\s+struct\s+(\w+)\s+(\w+)\s*;")
_TYPEDEF_FN = re.compile(r"typedef\s+([\w\s\*]+?)\s*\(\s*\*\s*(\w+)\s*\)\s*\(([^)]*)\)\s*;")
_PROTOTYPE = re.compile(r"([A-Za-z_][\w\s\*]*?)\b(fajit_\w+)\s*\(([^()]*)\)\s*;")
_DECL = re.compile(r"^((?:(?:const|unsigned|signed|long|short|struct|enum)\s+)*\w+)\s*(.*)$", re.S)
_DECLARATOR = re.compile(r"^(\**)\s*(\w+)\s*(?:\[\s*(\d+)\s*\])?$")
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\s+(\"[^\"]*\"|-?\d+)\s*$", re.M)


class HeaderError(Exception):
    """fajit.h holds a declaration this reader does not understand (the message names it)."""


class Header:
    """What fajit.h declares: enums, structs (ctypes classes), callbacks, prototypes and constants."""

    def __init__(self, text, path="fajit.h"):
        self.path = path
        self.defines = {m.group(1): (m.group(2)[1:-1] if m.group(2).startswith('"') else int(m.group(2)))
                        for m in _DEFINE.finditer(text)}
        code = _strip(text)
        nested = _NESTED.search(code)
        if nested:
            raise HeaderError(f"{path}: struct {nested.group(1)}: a nested struct or union is not read by "
                              "fajit/_header.py (declare it with its own typedef)")
        self.enums, self.structs, self.handles, self.callbacks = {}, {}, set(), {}
        self.prototypes = {}  # name -> (restype, argtypes), or HeaderError for one this reader cannot mirror
        for m in _TYPEDEF_ENUM.finditer(code):
            self.enums[m.group(2)] = _enum_values(m.group(2), m.group(1))
        for m in _TYPEDEF_OPAQUE.finditer(code):
            self.handles.add(m.group(2))
        # structs and callbacks in the order they appear: a later one may use an earlier one
        decls = sorted([(m.start(), "struct", m) for m in _TYPEDEF_STRUCT.finditer(code)] +
                       [(m.start(), "fn", m) for m in _TYPEDEF_FN.finditer(code)], key=lambda d: d[0])
        for _, kind, m in decls:
            if kind == "struct":
                self.structs[m.group(2)] = self._struct(m.group(2), m.group(1))
            else:
                res = self._type(m.group(1), f"callback {m.group(2)}: return type", ret=True)
                self.callbacks[m.group(2)] = ctypes.CFUNCTYPE(res, *self._params(m.group(3), m.group(2)))
        rest = _TYPEDEF_FN.sub(" ", _TYPEDEF_STRUCT.sub(" ", _TYPEDEF_ENUM.sub(" ", code)))
        for m in _PROTOTYPE.finditer(rest):
            name = m.group(2)
            try:
                res = self._type(m.group(1), f"{name}: return type", ret=True)
                self.prototypes[name] = (res, self._params(m.group(3), name))
            except HeaderError as e:
                self.prototypes[name] = e

    # ---- declarations -------------------------------------------------------------------------------
    def _struct(self, name, body):
        fields = []
        for member in (s.strip() for s in body.split(";")):
            if not member:
                continue
            m = _DECL.match(member)
            if not m:
                raise HeaderError(f"{self.path}: struct {name}: cannot read the member '{member}'")
            for decl in m.group(2).split(","):
                d = _DECLARATOR.match(decl.strip())
                if not d:
                    raise HeaderError(f"{self.path}: struct {name}: cannot read the declarator '{decl.strip()}' "
                                      f"of '{member}' (bit fields, function pointers written inline and nested "
                                      "types are not read: use a typedef)")
                ctype = self._type(m.group(1) + " " + d.group(1), f"struct {name}, field {d.group(2)}")
                if d.group(3):
                    ctype = ctype * int(d.group(3))
                fields.append((d.group(2), ctype))
        return type(name, (ctypes.Structure,), {"_fields_": fields, "__doc__": f"{name} (read from fajit.h)"})

    def _params(self, text, where):
        text = text.strip()
        if text in ("", "void"):
            return []
        out = []
        for p in text.split(","):
            m = re.match(r"^(.*?)(\w+)\s*$", p.strip(), re.S)  # drop the parameter's name
            out.append(self._type(m.group(1) if m and m.group(1).strip() else p, f"{where}: parameter '{p.strip()}'"))
        return out

    def _type(self, text, where, ret=False):
        """The ctypes type of a C type written as `text` ("const fajit_config *", "char **", "int")."""
        stars = text.count("*")
        words = [w for w in re.sub(r"[*]", " ", text).split() if w not in ("const", "struct", "enum")]
        base = " ".join(words)
        if ret and base == "void" and stars == 0:
            return None
        if stars == 0:
            return self._value_type(base, where)
        if stars == 1 and base == "char":
            return ctypes.c_char_p  # a NUL-terminated string (as an argument or a static result)
        if stars == 1 and (base == "void" or base in self.handles):
            return ctypes.c_void_p
        if stars == 2 and (base in ("void", "char") or base in self.handles):
            return ctypes.POINTER(ctypes.c_void_p)  # an out-pointer to a buffer or handle
        if stars == 1:
            return ctypes.POINTER(self._value_type(base, where))
        raise HeaderError(f"{self.path}: {where}: the type '{text.strip()}' is not mirrored by fajit/_header.py")

    def _value_type(self, base, where):
        if base in _SCALARS:
            return _SCALARS[base]
        if base in self.enums:
            return ctypes.c_int
        if base in self.structs:
            return self.structs[base]
        if base in self.callbacks:
            return self.callbacks[base]
        raise HeaderError(f"{self.path}: {where}: the type '{base}' is not mirrored by fajit/_header.py")

    def declare(self, lib):
        """Set restype/argtypes of every prototype on the loaded library `lib`; returns the names that
        could not be mirrored, with the reason (calling one of those is refused by fajit._lib)."""
        missing = {}
        for name, proto in self.prototypes.items():
            fn = getattr(lib, name, None)
            if isinstance(proto, HeaderError) or fn is None:
                missing[name] = str(proto) if isinstance(proto, HeaderError) else f"{name}: not in the library"
                continue
            fn.restype, fn.argtypes = proto
        return missing


def _strip(text):
    """fajit.h without comments, preprocessor lines and the C++ guard."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#[^\n]*(?:\\\n[^\n]*)*", " ", text, flags=re.M)
    return re.sub(r'extern\s+"C"\s*\{', " ", text)


def _enum_values(name, body):
    values, nxt = {}, 0
    for item in (s.strip() for s in body.split(",")):
        if not item:
            continue
        m = re.match(r"^(\w+)\s*(?:=\s*(-?\d+))?$", item)
        if not m:
            raise HeaderError(f"fajit.h: enum {name}: cannot read '{item}' (only integer literals are read)")
        nxt = int(m.group(2)) if m.group(2) is not None else nxt
        values[m.group(1)] = nxt
        nxt += 1
    return values


def load(path):
    """The Header of the fajit.h at `path`."""
    with open(path, encoding="utf-8") as f:
        return Header(f.read(), str(path))
