# SPDX-License-Identifier: MIT
"""Every ```python block of docs/python.md, and of the "In Python" section of docs/residency.md,
runs as it is written, each in a fresh process, against a daemon on the host backend with a
1 GiB budget ($ROCMMEM_SOCKET points at it). Blocks whose output the page states have it
checked."""
import os
import re
import unittest

from fixture import SOURCE_DIR, PyTestCase, child_env, read, run_python

DOC = os.path.join(SOURCE_DIR, "docs", "python.md")
RESIDENCY = os.path.join(SOURCE_DIR, "docs", "residency.md")

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

# The same for residency.md's "In Python": what the page says each block prints.
RESIDENCY_EXPECTED = {
    "text_encoder_2 = register(": [
        r"^unloaded: text_encoder, text_encoder_2, image_encoder, vae, transformer, vae, "
        r"transformer$", r"^loaded now: vae$"],
    "tile and vae": [r"^tile and vae: generation 1 1$", r"^on_evict: generation 1 newest 1$",
                     r"^tile released: True$", r"^acquired again: generation 2$"],
    "granted while loading": [r"^unloaded vae on rocmmem-events$",
                              r"^granted while loading: True$"],
}


def blocks(path=DOC, section=None):
    """The ```python blocks of a page, or of its section: from the heading line section to
    the next heading of level 1 to 3 outside a fenced block."""
    lines, inside, fenced = [], section is None, False
    for line in read(path).splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and section is not None and re.match(r"#{1,3} ", line):
            inside = line.rstrip("\n") == section
        if inside:
            lines.append(line)
    return re.findall(r"^```python\n(.*?)^```$", "".join(lines), flags=re.S | re.M)


class DocsTest(PyTestCase):
    def run_blocks(self, found, expected):
        """Runs each block against a fresh 1 GiB daemon's socket; checks what expected says
        of the blocks it names, and that every block it names is still there."""
        self.start_daemon(budget="1G")
        env = child_env(ROCMMEM_SOCKET=self.sock)
        checked = set()
        for code in found:
            with self.subTest(block=code.splitlines()[0:3]):
                p = run_python(code, env=env, timeout=60)
                self.assertEqual(p.returncode, 0, f"{code}\n--- stdout\n{p.stdout}"
                                                  f"--- stderr\n{p.stderr}")
                self.assertNotIn("Traceback", p.stderr)
                for phrase, patterns in expected.items():
                    if phrase in code:
                        checked.add(phrase)
                        for pattern in patterns:
                            self.assertRegex(p.stdout, re.compile(pattern, re.M),
                                             f"{phrase}: {p.stdout}")
        self.assertEqual(checked, set(expected), "blocks the page no longer has")
        st = self.status()
        self.assertEqual(st["leases"], [])
        self.assertEqual(st["models"], [])

    def test_every_python_block_runs(self):
        found = blocks()
        self.assertGreaterEqual(len(found), 8)
        self.run_blocks(found, EXPECTED)

    def test_residency_python_blocks_run(self):
        found = blocks(RESIDENCY, "### In Python")
        self.assertEqual(len(found), len(RESIDENCY_EXPECTED))
        self.run_blocks(found, RESIDENCY_EXPECTED)

    def test_the_fail_safe_block_without_a_daemon(self):
        code = [b for b in blocks() if "fail_safe=True" in b][0]
        p = run_python(code, env=child_env(ROCMMEM_SOCKET=os.path.join(self.dir, "no.sock")))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "running without rocmmemd\n")
        self.assertIn("carrying on without it", p.stderr)


if __name__ == "__main__":
    unittest.main()
