#!/usr/bin/env python3
"""Checks handler modules against the engine's handler ABI, version 1
(docs/HANDLERS.md, "The module's side"), and prints their imports and
exports. Standard library only.

usage: check_exports.py [--require NAME[,NAME...]] [--quiet] MODULE.wasm...

For each module it prints the memory, every import and export with its
signature, and the size; then checks that
  - `memory` is exported (and no memory is imported),
  - `ob_abi` is exported as () -> i32 (and, where its body is a constant,
    that the constant is 1),
  - every exported `ob_*` entry point has the ABI's signature, and there
    is at least one entry point (ob_message or ob_tcp_data),
  - every import is a function from module "outboard", is one the ABI
    names, and has the ABI's signature (so no `env` or WASI imports),
  - the names given with --require are exported.
Exit status: 0 when every module passes, 1 when one fails, 2 on usage or
parse errors.
"""

import sys

# The ABI's function signatures: name -> (params, results).
I32, I64 = "i32", "i64"
IMPORTS = {
    "input_read": ((I32, I32, I32), (I32,)),
    "msg_from": ((I32,), (I32,)),
    "reply": ((I32, I32), (I32,)),
    "send": ((I32, I32, I32, I32), (I32,)),
    "enqueue": ((I32, I32, I32), (I32,)),
    "tcp_write": ((I32, I32, I32), (I32,)),
    "tcp_close": ((I32,), (I32,)),
    "now_ns": ((), (I64,)),
    "kv_get": ((I32, I32, I32, I32), (I32,)),
    "kv_put": ((I32, I32, I32, I32), (I32,)),
    "kv_del": ((I32, I32), (I32,)),
    "log": ((I32, I32), (I32,)),
}
EXPORTS = {
    "ob_abi": ((), (I32,)),
    "ob_init": ((), (I32,)),
    "ob_message": ((I32, I32), (I32,)),
    "ob_tcp_open": ((I32,), (I32,)),
    "ob_tcp_data": ((I32, I32), (I32,)),
    "ob_tcp_close": ((I32,), (I32,)),
}
ENTRY_POINTS = ("ob_message", "ob_tcp_data")
IMPORT_MODULE = "outboard"

VALTYPES = {0x7F: "i32", 0x7E: "i64", 0x7D: "f32", 0x7C: "f64", 0x7B: "v128",
            0x70: "funcref", 0x6F: "externref"}
KINDS = {0: "func", 1: "table", 2: "memory", 3: "global", 4: "tag"}


class ParseError(Exception):
    pass


class Reader:
    """A cursor over a byte string with the wasm binary's primitive reads."""

    def __init__(self, data, pos=0, end=None):
        self.data, self.pos = data, pos
        self.end = len(data) if end is None else end

    def byte(self):
        if self.pos >= self.end:
            raise ParseError("unexpected end of data")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def u32(self):
        result, shift = 0, 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise ParseError("LEB128 too long")

    def s64(self):
        result, shift = 0, 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                if b & 0x40:
                    result -= 1 << shift
                return result
            if shift > 70:
                raise ParseError("LEB128 too long")

    def bytes(self, n):
        if self.pos + n > self.end:
            raise ParseError("unexpected end of data")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def name(self):
        return self.bytes(self.u32()).decode("utf-8")

    def valtype(self):
        b = self.byte()
        if b not in VALTYPES:
            raise ParseError("unknown value type 0x%02x" % b)
        return VALTYPES[b]

    def limits(self):
        flags = self.byte()
        minimum = self.u32()
        maximum = self.u32() if flags & 1 else None
        return minimum, maximum


def parse(data):
    """The module's types, imports, function types, memories, exports and
    code bodies, as plain Python values."""
    if data[:4] != b"\0asm":
        raise ParseError("not a wasm module (bad magic)")
    if data[4:8] != b"\1\0\0\0":
        raise ParseError("unsupported wasm version")
    r = Reader(data, 8)
    m = {"types": [], "imports": [], "funcs": [], "memories": [], "exports": [],
         "code": []}
    while r.pos < r.end:
        sid = r.byte()
        size = r.u32()
        s = Reader(data, r.pos, r.pos + size)
        r.pos += size
        if sid == 1:  # type
            for _ in range(s.u32()):
                form = s.byte()
                if form != 0x60:
                    raise ParseError("unsupported type form 0x%02x" % form)
                params = tuple(s.valtype() for _ in range(s.u32()))
                results = tuple(s.valtype() for _ in range(s.u32()))
                m["types"].append((params, results))
        elif sid == 2:  # import
            for _ in range(s.u32()):
                module, name, kind = s.name(), s.name(), s.byte()
                if kind == 0:
                    desc = s.u32()
                elif kind == 1:
                    desc = (s.valtype(), s.limits())
                elif kind == 2:
                    desc = s.limits()
                elif kind == 3:
                    desc = (s.valtype(), s.byte())
                else:
                    raise ParseError("unsupported import kind %d" % kind)
                m["imports"].append((module, name, KINDS[kind], desc))
        elif sid == 3:  # function
            m["funcs"] = [s.u32() for _ in range(s.u32())]
        elif sid == 5:  # memory
            m["memories"] = [s.limits() for _ in range(s.u32())]
        elif sid == 7:  # export
            for _ in range(s.u32()):
                name, kind, index = s.name(), s.byte(), s.u32()
                m["exports"].append((name, KINDS.get(kind, "?%d" % kind), index))
        elif sid == 10:  # code
            for _ in range(s.u32()):
                n = s.u32()
                m["code"].append(s.bytes(n))
    return m


def sig(t):
    params, results = t
    return "(%s) -> %s" % (", ".join(params), ", ".join(results) or "()")


def func_type(m, index):
    """The type of function `index` in the function index space."""
    imported = [i for i in m["imports"] if i[2] == "func"]
    if index < len(imported):
        return m["types"][imported[index][3]]
    return m["types"][m["funcs"][index - len(imported)]]


def const_body(m, index):
    """The constant a defined function returns, when its body is exactly
    `i32.const N; end` with no locals; else None."""
    imported = len([i for i in m["imports"] if i[2] == "func"])
    if index < imported:
        return None
    body = Reader(m["code"][index - imported])
    try:
        if body.u32() != 0 or body.byte() != 0x41:
            return None
        n = body.s64()
        return n if body.byte() == 0x0B and body.pos == body.end else None
    except ParseError:
        return None


def check(path, required, quiet):
    """Prints one module's listing and returns its list of problems."""
    with open(path, "rb") as f:
        data = f.read()
    m = parse(data)
    problems = []
    out = ["%s: %d bytes" % (path, len(data))]
    for lo, hi in m["memories"]:
        out.append("  memory: %d pages initial (%d KiB), max %s"
                   % (lo, lo * 64, "none" if hi is None else hi))
    for module, name, kind, desc in m["imports"]:
        if kind == "func":
            t = m["types"][desc]
            out.append("  import %s.%s: func %s" % (module, name, sig(t)))
            if module != IMPORT_MODULE:
                problems.append("imports %s.%s: only module %r may be imported from"
                                % (module, name, IMPORT_MODULE))
            elif name not in IMPORTS:
                problems.append("imports %s.%s: not a function of ABI version 1"
                                % (module, name))
            elif t != IMPORTS[name]:
                problems.append("imports %s.%s as %s; the ABI says %s"
                                % (module, name, sig(t), sig(IMPORTS[name])))
        else:
            out.append("  import %s.%s: %s" % (module, name, kind))
            problems.append("imports a %s (%s.%s): a handler imports only functions"
                            % (kind, module, name))
    exports = {}
    for name, kind, index in m["exports"]:
        exports[name] = kind
        if kind == "func":
            t = func_type(m, index)
            out.append("  export %s: func %s" % (name, sig(t)))
            if name in EXPORTS and t != EXPORTS[name]:
                problems.append("exports %s as %s; the ABI says %s"
                                % (name, sig(t), sig(EXPORTS[name])))
            elif name.startswith("ob_") and name not in EXPORTS:
                problems.append("exports %s: not an entry point of ABI version 1" % name)
            if name == "ob_abi":
                n = const_body(m, index)
                if n is not None and n != 1:
                    problems.append("ob_abi returns %d; ABI version 1 needs 1" % n)
                elif n is None:
                    out.append("    (ob_abi's body is not a constant: its value is unchecked)")
        else:
            out.append("  export %s: %s" % (name, kind))
            if name in EXPORTS:
                problems.append("exports %s as a %s, not a function" % (name, kind))
    if exports.get("memory") != "memory":
        problems.append("does not export its memory as `memory`")
    if "ob_abi" not in exports:
        problems.append("does not export ob_abi")
    if not any(e in exports for e in ENTRY_POINTS):
        problems.append("exports no entry point (%s)" % " or ".join(ENTRY_POINTS))
    if ("ob_tcp_open" in exports or "ob_tcp_close" in exports) and "ob_tcp_data" not in exports:
        problems.append("exports ob_tcp_open/ob_tcp_close without ob_tcp_data")
    for name in required:
        if name not in exports:
            problems.append("does not export %s (required)" % name)
    if not quiet:
        print("\n".join(out))
    for p in problems:
        print("  PROBLEM: %s" % p)
    if not quiet or problems:
        print("  %s" % ("ok" if not problems else "FAILED"))
    return problems


def main(argv):
    required, quiet, paths = [], False, []
    args = iter(argv)
    for a in args:
        if a == "--require":
            required += [n for n in next(args, "").split(",") if n]
        elif a == "--quiet":
            quiet = True
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            paths.append(a)
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    failed = 0
    for path in paths:
        try:
            if check(path, required, quiet):
                failed += 1
        except (OSError, ParseError, UnicodeDecodeError, IndexError) as e:
            print("%s: cannot read: %s" % (path, e), file=sys.stderr)
            return 2
    if len(paths) > 1:
        print("%d module(s), %d failed" % (len(paths), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
