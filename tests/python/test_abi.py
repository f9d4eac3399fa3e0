# SPDX-License-Identifier: MIT
"""The ctypes mirror of rocmmem.h (rocmmem/_native.py) against the compiler and the header.

abi_dump (abi_dump.c, built against client/include/rocmmem.h) prints each struct's size and
alignment and each field's offset and size; the header itself is read for the field names of
every struct it defines. A header change the package misses (a field added, moved or retyped,
a constant renumbered) fails here.
"""
import ctypes
import os
import re
import subprocess
import unittest

from fixture import SOURCE_DIR, read

from rocmmem import _native as N

HEADER = os.path.join(SOURCE_DIR, "client", "include", "rocmmem.h")


def dump():
    path = os.environ.get("ROCMMEM_ABI_DUMP")
    if not path:
        raise unittest.SkipTest("$ROCMMEM_ABI_DUMP is not set: run through ctest -L python")
    out = subprocess.run([path], capture_output=True, text=True, check=True).stdout
    structs, fields, consts, enum_size, typedefs = {}, {}, {}, None, {}
    for line in out.splitlines():
        kind, *rest = line.split()
        if kind == "struct":
            structs[rest[0]] = (int(rest[1]), int(rest[2]))
        elif kind == "field":
            s, f = rest[0].split(".")
            fields.setdefault(s, []).append((f, int(rest[1]), int(rest[2])))
        elif kind == "const":
            consts[rest[0]] = int(rest[1])
        elif kind == "enum":
            enum_size = int(rest[0])
        elif kind == "typedef":
            typedefs[rest[0]] = (int(rest[1]), rest[2] == "1")
    return structs, fields, consts, enum_size, typedefs


def header_structs():
    """{struct name: [field names in order]} for every struct the header defines."""
    text = read(HEADER)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    found = {}
    for m in re.finditer(r"struct\s+(rocmmem_\w+)\s*\{(.*?)\};", text, flags=re.S):
        names = []
        for decl in m.group(2).split(";"):
            decl = decl.strip()
            if decl:
                names.append(re.search(r"(\w+)\s*(\[[^\]]*\])?$", decl).group(1))
        found[m.group(1)] = names
    return found


class AbiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.structs, cls.fields, cls.consts, cls.enum_size, cls.typedefs = dump()

    def test_every_header_struct_is_mirrored_with_its_fields_in_order(self):
        header = header_structs()
        self.assertEqual(sorted(header), sorted(N.STRUCTS),
                         "the header's structs and rocmmem/_native.py's STRUCTS differ")
        for cname, fields in header.items():
            with self.subTest(struct=cname):
                mirrored = [f for f, _ in N.STRUCTS[cname]._fields_]
                self.assertEqual(mirrored, fields)

    def test_sizes_alignments_and_offsets_match_the_compiler(self):
        self.assertEqual(sorted(self.structs), sorted(N.STRUCTS),
                         "abi_dump.c and rocmmem/_native.py's STRUCTS cover different structs")
        for cname, cls in N.STRUCTS.items():
            with self.subTest(struct=cname):
                size, align = self.structs[cname]
                self.assertEqual(ctypes.sizeof(cls), size, "sizeof")
                self.assertEqual(ctypes.alignment(cls), align, "alignment")
                dumped = self.fields[cname]
                self.assertEqual([f for f, _, _ in dumped], [f for f, _ in cls._fields_],
                                 "abi_dump.c must print every field the package mirrors")
                for fname, offset, fsize in dumped:
                    desc = getattr(cls, fname)
                    self.assertEqual(desc.offset, offset, f"offsetof {fname}")
                    self.assertEqual(desc.size, fsize, f"sizeof {fname}")

    def test_constants(self):
        self.assertEqual(ctypes.sizeof(N.c_enum), self.enum_size)
        c = self.consts
        for kind, value in N.HANDLE_NAMES.items():
            name = "ROCMMEM_HANDLE_" + value.upper().replace("-", "_")
            self.assertEqual(c[name], kind, name)
        self.assertEqual(c["ROCMMEM_LEASE_NOMAP"], N.LEASE_NOMAP)
        for bit in ("RUNTIME", "VRAM", "GTT", "TEMPERATURE", "POWER", "BUSY"):
            self.assertEqual(c["ROCMMEM_DEVICE_HAS_" + bit], getattr(N, "DEVICE_HAS_" + bit))
        for i, name in enumerate(N.MODEL_CLASSES):
            self.assertEqual(c["ROCMMEM_MODEL_" + name.upper()], i)
        for i, name in enumerate(N.MODEL_STATES):
            self.assertEqual(c["ROCMMEM_MODEL_" + name.upper()], i)
        for name in ("SHUTDOWN", "EVICT_REQUEST", "MODEL_REVOKED", "LEASE_REVOKED",
                     "DISCONNECTED", "SAMPLE", "TELEMETRY", "RECONNECTING", "RECONNECTED",
                     "OTHER"):
            self.assertEqual(c["ROCMMEM_EVENT_" + name], getattr(N, "EVENT_" + name))
        self.assertEqual(c["ROCMMEM_CONNECT_NO_RECONNECT"], N.CONNECT_NO_RECONNECT)
        self.assertEqual(c["ROCMMEM_CONNECT_NO_WAIT"], N.CONNECT_NO_WAIT)
        for i, name in enumerate(N.CONNECTION_STATES):
            self.assertEqual(c["ROCMMEM_" + name.upper()], i)
        self.assertEqual(c["ROCMMEM_SUBSCRIBE_SAMPLES"], N.SUBSCRIBE_SAMPLES)
        self.assertEqual(c["ROCMMEM_SUBSCRIBE_EVENTS"], N.SUBSCRIBE_EVENTS)
        self.assertEqual(c["ROCMMEM_SAMPLE_INTERVAL_MIN_MS"], N.SAMPLE_INTERVAL_MIN_MS)
        self.assertEqual(c["ROCMMEM_SAMPLE_INTERVAL_MAX_MS"], N.SAMPLE_INTERVAL_MAX_MS)
        self.assertEqual(c["ROCMMEM_NO_WAIT"], N.NO_WAIT)
        self.assertEqual(c["ROCMMEM_WAIT_FOREVER"], N.WAIT_FOREVER)
        self.assertEqual(c["ROCMMEM_ALL_DEVICES"], N.ALL_DEVICES)

    def test_version_and_the_api_types(self):
        c = self.consts
        self.assertEqual((c["ROCMMEM_VERSION_MAJOR"], c["ROCMMEM_VERSION_MINOR"],
                          c["ROCMMEM_VERSION_PATCH"]),
                         (N.VERSION_MAJOR, N.VERSION_MINOR, N.VERSION_PATCH))
        self.assertEqual(c["ROCMMEM_VERSION_NUMBER"], N.VERSION_NUMBER)
        # One type for timeouts (signed: < 0 waits forever), one for devices (unsigned).
        self.assertEqual(self.typedefs["rocmmem_timeout_ms"],
                         (ctypes.sizeof(N.c_timeout_ms), True))
        self.assertEqual(self.typedefs["rocmmem_device_index"],
                         (ctypes.sizeof(N.c_device_index), False))
        lib = N.load()
        self.assertEqual(lib.rocmmem_version_number(), N.VERSION_NUMBER)
        self.assertEqual(lib.rocmmem_version().decode(),
                         f"{N.VERSION_MAJOR}.{N.VERSION_MINOR}.{N.VERSION_PATCH}")

    def test_structs_that_grow_carry_their_size(self):
        for cls in (N.ConnectOptions, N.LeaseRequest, N.ModelDesc, N.EvictResult):
            with self.subTest(struct=cls.__name__):
                self.assertEqual(cls._fields_[0][0], "struct_size")
                self.assertEqual(cls().struct_size, ctypes.sizeof(cls))

    def test_every_function_of_the_header_has_a_prototype(self):
        text = read(HEADER)
        declared = set(re.findall(r"\b(rocmmem_\w+)\s*\(", text))
        declared = {d for d in declared if not d.endswith("_fn")}
        self.assertEqual(sorted(declared - set(N.PROTOTYPES)), [],
                         "functions of rocmmem.h without a ctypes prototype")
        self.assertEqual(sorted(set(N.PROTOTYPES) - declared), [])

    def test_the_library_loads_with_every_prototype(self):
        lib = N.load()
        self.assertEqual(lib.rocmmem_strerror(-12).decode(),
                         "not enough memory free within the budget")
        self.assertEqual(lib.rocmmem_telemetry_name(1).decode(), "lease_granted")

    def test_library_not_found(self):
        # In a child: the package loads the library once per process.
        from fixture import child_env, run_python
        p = run_python("""
            import rocmmem
            try:
                rocmmem.connect()
            except rocmmem.LibraryNotFound as e:
                assert isinstance(e, ImportError)
                print("missing:", e)
            c = rocmmem.connect(fail_safe=True)
            print("fail-safe:", c.available, c.status())
            """, env=child_env(ROCMMEM_LIBRARY="/nonexistent/librocmmem.so.1"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("missing: Could not load /nonexistent/librocmmem.so.1", p.stdout)
        self.assertIn("fail-safe: False None", p.stdout)
        self.assertIn("carrying on without rocmmemd", p.stderr)


if __name__ == "__main__":
    unittest.main()
