# SPDX-License-Identifier: MIT
"""Every ```python block of docs/python.md runs as it is written, each in a fresh process,
against a daemon on the host backend with a 1 GiB budget ($ROCMMEM_SOCKET points at it).
Blocks whose output the page states have it checked."""
import os
import re
import unittest

from fixture import SOURCE_DIR, PyTestCase, child_env, read, run_python

DOC = os.path.join(SOURCE_DIR, "docs", "python.md")

# A phrase that identifies a block -> what its output must contain.
EXPECTED = {
    'tag="scratch"': [r"^\d+ 67108864 b'hello'$", r"^0$"],
    "except rocmmem.TooLarge": [r"^7 requested 64 GiB on device 0", r"^timed out after 100 ms"],
    "def unload(model)": [r"^unloaded vae$", r"^granted; vae resident: False$"],
    "vae-tiles": [r"^67108864$"],
    "select.select": [r"^sample $", r"^event lease_granted$"],
    "asyncio.run": [r"^\d+(\.\d+)? [KMG]?i?B free$"],
    "st[\"denials\"]": [r"^0 host memory .* free of 1 GiB$", r"^trimmed 0 bytes$",
                        r"rocmmemd_clients \d+"],
    "fail_safe=True": [r"^coordinated by rocmmemd$"],
}


def blocks():
    return re.findall(r"^```python\n(.*?)^```$", read(DOC), flags=re.S | re.M)


class DocsTest(PyTestCase):
    def test_every_python_block_runs(self):
        found = blocks()
        self.assertGreaterEqual(len(found), 8)
        self.start_daemon(budget="1G")
        env = child_env(ROCMMEM_SOCKET=self.sock)
        checked = set()
        for code in found:
            with self.subTest(block=code.splitlines()[0:3]):
                p = run_python(code, env=env, timeout=60)
                self.assertEqual(p.returncode, 0, f"{code}\n--- stdout\n{p.stdout}"
                                                  f"--- stderr\n{p.stderr}")
                self.assertNotIn("Traceback", p.stderr)
                for phrase, patterns in EXPECTED.items():
                    if phrase in code:
                        checked.add(phrase)
                        for pattern in patterns:
                            self.assertRegex(p.stdout, re.compile(pattern, re.M),
                                             f"{phrase}: {p.stdout}")
        self.assertEqual(checked, set(EXPECTED), "blocks the page no longer has")
        st = self.status()
        self.assertEqual(st["leases"], [])
        self.assertEqual(st["models"], [])

    def test_the_fail_safe_block_without_a_daemon(self):
        code = [b for b in blocks() if "fail_safe=True" in b][0]
        p = run_python(code, env=child_env(ROCMMEM_SOCKET=os.path.join(self.dir, "no.sock")))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "running without rocmmemd\n")
        self.assertIn("carrying on without it", p.stderr)


if __name__ == "__main__":
    unittest.main()
