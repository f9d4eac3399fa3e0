# SPDX-License-Identifier: MIT
"""Every refusal reaches Python as the right rocmmem.Error subclass, with the errno and the
daemon's own explanation (rocmmem_last_error) as strerror."""
import errno
import threading
import unittest

from fixture import (BUDGET, SOURCE_DIR, MiB, PyTestCase, child_env, reachable_copy,
                     rocmmem)


class ErrorTest(PyTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()
        self.c = self.connect(name="errors")

    def assert_error(self, cm, cls, code, *words):
        e = cm.exception
        self.assertIs(type(e), cls, e)
        self.assertIsInstance(e, rocmmem.Error)
        self.assertIsInstance(e, OSError)
        self.assertEqual(e.errno, code)
        for w in words:
            self.assertIn(w, e.strerror)
        self.assertIn(e.strerror, str(e))
        return e

    def test_too_large(self):
        with self.assertRaises(rocmmem.TooLarge) as cm:
            self.c.lease(BUDGET + 2 * MiB)
        e = self.assert_error(cm, rocmmem.TooLarge, errno.E2BIG, "66 MiB",
                              "whole budget of 64 MiB")
        self.assertIn("E2BIG", str(e))

    def test_out_of_memory_explains_who_holds_the_rest(self):
        holder = self.connect(name="holder")
        held = holder.lease("48M")
        with self.assertRaises(rocmmem.OutOfMemory) as cm:
            self.c.lease("32M")
        self.assert_error(cm, rocmmem.OutOfMemory, errno.ENOMEM, "requested 32 MiB",
                          "16 MiB of its 64 MiB budget is free", "'holder'", "suggestion")
        held.release()

    def test_timeout(self):
        holder = self.connect(name="holder")
        held = holder.lease("60M")
        with self.assertRaises(rocmmem.Timeout) as cm:
            self.c.lease("8M", timeout=0.2)
        e = self.assert_error(cm, rocmmem.Timeout, errno.ETIMEDOUT, "timed out after")
        self.assertIsInstance(e, TimeoutError)
        held.release()

    def test_deadlock(self):
        # Only this client's own model in use could make room: it would wait forever.
        big = self.c.register_model("big", "48M", model_class="transformer")
        other = self.c.register_model("other", "32M", model_class="vae")
        big.acquire()
        with self.assertRaises(rocmmem.Deadlock) as cm:
            other.acquire(timeout=None)
        self.assert_error(cm, rocmmem.Deadlock, errno.EDEADLK, "model 'other'")
        big.release()

    def test_permission_and_not_found_for_other_clients_models(self):
        owner = self.connect(name="owner")
        m = owner.register_model("theirs", "2M")
        # Only the owner (or root) may evict or pin: as root the daemon lets us, so check
        # the owner-only requests instead: acquire and release of someone else's model.
        with self.assertRaises(rocmmem.Error) as cm:
            self.c.evict_ack(m.id)
        self.assertIn(type(cm.exception), (rocmmem.PermissionDenied, rocmmem.NotFound))
        self.assertIn(cm.exception.errno, (errno.EPERM, errno.ENOENT))
        self.assertIn(str(m.id), cm.exception.strerror)
        with self.assertRaises(rocmmem.NotFound) as cm:
            self.c.evict_model(999999)
        self.assert_error(cm, rocmmem.NotFound, errno.ENOENT)
        with self.assertRaises(rocmmem.NotFound) as cm:
            self.c.lease("2M", device=7)
        self.assert_error(cm, rocmmem.NotFound, errno.ENODEV, "device 7")

    def test_eviction_of_a_model_in_use_is_busy(self):
        m = self.c.register_model("busy", "2M")
        with m.use():
            with self.assertRaises(rocmmem.Busy) as cm:
                self.c.evict_model(m)
            self.assert_error(cm, rocmmem.Busy, errno.EBUSY)

    def test_invalid_arguments(self):
        m = self.c.register_model("idle", "2M")
        with self.assertRaises(rocmmem.InvalidArgument) as cm:
            m.release()  # never acquired
        self.assert_error(cm, rocmmem.InvalidArgument, errno.EINVAL)
        self.assertIsInstance(cm.exception, ValueError)
        with self.assertRaises(rocmmem.InvalidArgument):
            self.c.register_model("x" * 100)
        with self.assertRaises(ValueError):
            self.c.register_model("bad-class", model_class="unet")
        with self.assertRaises(ValueError):
            self.c.lease("2M", timeout=-1)
        with self.assertRaises(ValueError):
            self.c.subscribe(interval=0.001)

    def test_permission_denied_as_another_user(self):
        import os
        if os.geteuid() != 0:
            self.skipTest("needs root to run a client as another user")
        m = self.c.register_model("mine", "2M")
        os.chmod(self.dir, 0o755)  # let user nobody reach the socket
        os.chmod(self.sock, 0o777)
        # The package and library where user nobody can read them (the checkout may not be).
        package = reachable_copy(os.path.join(SOURCE_DIR, "client", "python", "rocmmem"))
        env = child_env(PYTHONPATH=os.path.dirname(package),
                        ROCMMEM_LIBRARY=reachable_copy(os.environ["ROCMMEM_LIBRARY"]))
        p = self.python("""
            os.setgid(65534)
            os.setuid(65534)
            c = rocmmem.connect(socket=SOCK)
            try:
                c.pin_model(int(sys.argv[2]))
            except rocmmem.PermissionDenied as e:
                say("denied", e.errno, e.strerror)
            """, str(m.id), name="nobody", env=env)
        self.assertEqual(p.wait(20), 0, p)
        self.assertIn(f"denied {errno.EPERM} ", p.stdout())
        self.assertFalse([x for x in self.status()["models"] if x["id"] == m.id][0]["pinned"])

    def test_messages_are_per_thread(self):
        holder = self.connect(name="holder")
        held = holder.lease("60M")
        got = {}

        def refuse(name, size):
            try:
                self.c.lease(size)
            except rocmmem.Error as e:
                got[name] = e

        threads = [threading.Thread(target=refuse, args=("big", "1G")),
                   threading.Thread(target=refuse, args=("small", "8M"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        self.assertIsInstance(got["big"], rocmmem.TooLarge)
        self.assertIn("1 GiB", got["big"].strerror)
        self.assertIsInstance(got["small"], rocmmem.OutOfMemory)
        self.assertIn("8 MiB", got["small"].strerror)
        held.release()

    def test_daemon_unavailable(self):
        with self.assertRaises(rocmmem.DaemonUnavailable) as cm:
            rocmmem.connect(socket=self.dir + "/none.sock", timeout=0)
        e = self.assert_error(cm, rocmmem.DaemonUnavailable, errno.ENOENT, "no rocmmemd")
        self.assertIsInstance(e, ConnectionError)
        self.daemon.stop()
        with self.assertRaises(rocmmem.DaemonUnavailable) as cm:
            self.c.lease("2M")
        self.assertIn(cm.exception.errno, (errno.ECONNRESET, errno.EPIPE, errno.ESHUTDOWN))
        self.assertFalse(self.c.available)

    def test_errors_pickle(self):
        import pickle
        e = rocmmem.OutOfMemory(errno.ENOMEM, "no room")
        back = pickle.loads(pickle.dumps(e))
        self.assertIs(type(back), rocmmem.OutOfMemory)
        self.assertEqual((back.errno, back.strerror), (errno.ENOMEM, "no room"))


if __name__ == "__main__":
    unittest.main()
