# SPDX-License-Identifier: MIT
"""One size rule everywhere: rocmmem.parse_size and common/size.c's size_parse (which rocmmemd's
options and config file and rocmmemctl use) read size_cases.CASES alike, and random hostile
text alike; the C one does in a decimal-comma and a Turkish locale too; fractions are
truncated to whole bytes, then granted in whole granules, through the package."""
import os
import random
import shutil
import subprocess
import tempfile
import unittest

from fixture import GRANULE, MiB, PyTestCase, rocmmem
from size_cases import CASES, EINVAL, ERANGE

parse_size = rocmmem.parse_size
GiB = 1 << 30


def python_result(text):
    """parse_size(text) as size_dump prints size_parse's result: a byte count, or the error."""
    try:
        return parse_size(text)
    except ValueError as e:
        return ERANGE if "too large" in str(e) else EINVAL


def c_results(texts, env=None):
    """size_parse over texts, through size_dump: (its locale line, [result per text])."""
    dump = os.environ["ROCMMEM_SIZE_DUMP"]
    data = "".join(t.encode("utf-8").hex() + "\n" for t in texts)
    p = subprocess.run([dump], input=data, capture_output=True, text=True, env=env,
                       timeout=60, check=False)
    if p.returncode != 0:
        raise AssertionError(f"size_dump exited {p.returncode}: {p.stderr}")
    lines = p.stdout.splitlines()
    out = [int(l[3:]) if l.startswith("ok ") else l for l in lines[1:]]
    if len(out) != len(texts):
        raise AssertionError(f"size_dump answered {len(out)} of {len(texts)} texts")
    return lines[0], out


def hostile_texts(n, seed):
    """n texts near the grammar: digits, points, units, signs, spaces, look-alikes."""
    rng = random.Random(seed)
    alphabet = list("0123456789.....KMGTkmgtiIbB -+eEx,_\t\n") + [
        "\u212a", "\u0131", "\u0130", "\uff11", "\u00a0", "\u0661"]
    texts = []
    for _ in range(n):
        if rng.random() < 0.5:
            texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))))
            continue
        # Mostly well-formed: digits, maybe a fraction of 0 to 20 digits, maybe a unit.
        whole = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 22)))
        frac = "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 20)))
        unit = rng.choice(["", "B", "K", "M", "G", "T", "KiB", "gib", "Ti", "GB", "P"])
        texts.append(whole + (frac if rng.random() < 0.6 else "") + unit)
    return texts


class SharedTable(unittest.TestCase):
    def test_python_reads_every_case_as_written(self):
        for text, want in CASES:
            with self.subTest(text=text):
                self.assertEqual(python_result(text), want)

    def test_c_reads_every_case_as_written(self):
        _, got = c_results([t for t, _ in CASES])
        for (text, want), result in zip(CASES, got):
            with self.subTest(text=text):
                self.assertEqual(result, want)

    def test_both_agree_on_hostile_text(self):
        texts = hostile_texts(4000, seed=15)
        _, got = c_results(texts)
        accepted = 0
        for text, result in zip(texts, got):
            with self.subTest(text=text):
                self.assertEqual(python_result(text), result)
            accepted += isinstance(result, int)
        # Both kinds of answer were exercised, not only refusals.
        self.assertGreater(accepted, 200)
        self.assertGreater(len(texts) - accepted, 200)

    def test_the_locale_changes_nothing(self):
        """size_parse reads its digits itself: no strtod, whose decimal point follows
        LC_NUMERIC ("1,5G" would pass under de_DE), and no toupper (Turkish "i")."""
        localedef = shutil.which("localedef")
        if not localedef or not os.path.isdir("/usr/share/i18n/locales"):
            self.skipTest("localedef or the locale sources (Debian: locales) are missing")
        texts = [t for t, _ in CASES] + ["1,5G", "0,9G", "1gib", "1GIB", "1kib", "1.5mib"]
        _, plain = c_results(texts)
        with tempfile.TemporaryDirectory() as locpath:
            for name, point in (("de_DE", ","), ("tr_TR", ",")):
                subprocess.run([localedef, "-i", name, "-f", "UTF-8",
                                os.path.join(locpath, f"{name}.UTF-8")],
                               check=True, capture_output=True, timeout=120)
                env = dict(os.environ, LOCPATH=locpath, LC_ALL=f"{name}.UTF-8")
                head, got = c_results(texts, env=env)
                with self.subTest(locale=name):
                    # The locale really is in force: its decimal point is a comma.
                    self.assertEqual(head, f"locale {name}.UTF-8 decimal_point {point}")
                    self.assertEqual(got, plain)
        self.assertEqual(plain[-6:], [EINVAL, EINVAL, GiB, GiB, 1024, 3 * MiB // 2])


class ParseSize(unittest.TestCase):
    def test_fractions_are_truncated(self):
        self.assertEqual(parse_size("0.9G"), 966367641)  # 966367641.6
        self.assertEqual(parse_size("0.1K"), 102)        # 102.4
        self.assertEqual(parse_size("1.5G"), 1610612736)
        self.assertEqual(parse_size("0.0009765624K"), 0)

    def test_ints(self):
        self.assertEqual(parse_size(0), 0)
        self.assertEqual(parse_size((1 << 64) - 1), (1 << 64) - 1)
        # Past 64 bits ctypes would keep the low bits: 2**64 + 4096 would lease 4096.
        for n in (1 << 64, (1 << 64) + 4096, 1 << 200):
            with self.subTest(n=n):
                with self.assertRaisesRegex(ValueError, "64 bits"):
                    parse_size(n)
        with self.assertRaisesRegex(ValueError, "negative"):
            parse_size(-1)

    def test_other_types(self):
        for value in (True, False, 1.5, None, b"4G", bytearray(b"4G"), [4], 4j):
            with self.subTest(value=value):
                with self.assertRaises(TypeError):
                    parse_size(value)

    def test_hostile_strings(self):
        # A NUL would end the text for C; here it is simply malformed.
        for text in ("4\0G", "4G\0", "\0", "0.9\0G"):
            with self.subTest(text=text):
                with self.assertRaisesRegex(ValueError, "invalid size"):
                    parse_size(text)
        # Python's int() refuses over 4300 digits with its own message: these are read as
        # the rule says, leading zeros and all.
        self.assertEqual(parse_size("0" * 100000 + "1G"), GiB)
        with self.assertRaisesRegex(ValueError, "too large"):
            parse_size("9" * 100000)
        with self.assertRaisesRegex(ValueError, "invalid size"):
            parse_size("9" * 100000 + "X")
        with self.assertRaisesRegex(ValueError, "invalid size"):
            parse_size("0." + "5" * 100000 + "G")

    def test_messages_say_why(self):
        with self.assertRaisesRegex(ValueError, "a fraction needs a suffix"):
            parse_size("1.5")
        with self.assertRaisesRegex(ValueError, r"invalid size '4GB'"):
            parse_size("4GB")


class Granted(PyTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()
        self.c = self.connect()

    def test_a_fraction_is_truncated_then_rounded_to_granules(self):
        for text, want in (("0.9M", GRANULE), ("2.9M", 2 * GRANULE), ("4.0000001M", 4 * MiB),
                           ("4.000001M", 4 * MiB + GRANULE)):
            with self.subTest(size=text):
                lease = self.c.lease(text)
                try:
                    self.assertEqual(lease.size, want)
                finally:
                    lease.release()

    def test_a_refused_size_asks_nothing(self):
        for text in ("0.9GB", "1.5", " 4M", "4M\n"):
            with self.subTest(size=text):
                with self.assertRaises(ValueError):
                    self.c.lease(text)
        self.assertEqual(self.status()["leases"], [])


if __name__ == "__main__":
    unittest.main()
