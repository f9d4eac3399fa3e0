# SPDX-License-Identifier: MIT
"""Leases from Python: written and read back, seen by the daemon, released every way a lease
can go (release(), with, close(), garbage collection, twice), from several threads."""
import ctypes
import gc
import os
import threading
import unittest
import weakref

from fixture import BUDGET, GRANULE, MiB, PyTestCase, rocmmem


class LeaseTest(PyTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def leased(self):
        return self.status()["devices"][0]["leased_bytes"]

    def test_a_client_without_arenas_gets_a_memfd_per_lease(self):
        os.environ["ROCMMEM_HOST_ARENA"] = "0"
        try:
            c = self.connect()
        finally:
            del os.environ["ROCMMEM_HOST_ARENA"]
        lease = c.lease("2M")
        pattern = bytes(range(256)) * 64
        lease.buffer[1 * MiB:1 * MiB + len(pattern)] = pattern
        self.assertEqual(lease.handle_kind, "memfd")
        # Through the memfd the daemon handed over, read with os.pread.
        self.assertEqual(os.pread(lease.fd, 16, 1 * MiB), pattern[:16])
        lease.release()

    def test_written_from_python_read_through_ptr_and_by_the_daemon_books(self):
        c = self.connect()
        self.assertTrue(c.available)
        self.assertEqual(c.backend, "host")
        self.assertEqual(c.device_count, 1)
        lease = c.lease("3M", tag="py-pattern")
        self.assertEqual(lease.size, 2 * GRANULE)  # rounded up to granules
        self.assertEqual(lease.device, 0)
        self.assertEqual(lease.handle_kind, "memfd")
        self.assertEqual(lease.tag, "py-pattern")
        self.assertGreater(lease.id, 0)
        buf = lease.buffer
        self.assertIsInstance(buf, memoryview)
        self.assertFalse(buf.readonly)
        self.assertEqual(len(buf), lease.size)
        pattern = bytes(range(256)) * 64  # 16 KiB
        for off in range(0, lease.size, len(pattern)):
            buf[off:off + len(pattern)] = pattern
        # The same memory through the library's own mapping (lease.ptr) ...
        self.assertEqual(lease.ptr % GRANULE, 0, "the library maps host leases 2 MiB-aligned")
        raw = (ctypes.c_char * lease.size).from_address(lease.ptr)
        self.assertEqual(raw[:len(pattern)], pattern)
        self.assertEqual(raw[lease.size - len(pattern):lease.size], pattern)
        # ... and back: written through ptr, read through the buffer.
        ctypes.memset(lease.ptr + 100, 0xAB, 10)
        self.assertEqual(bytes(buf[100:110]), b"\xab" * 10)
        # A range of the client's host arena: no fd of its own (the next test has one).
        self.assertEqual(lease.fd, -1)
        st = self.status()
        mine = [l for l in st["leases"] if l["owner_pid"] == os.getpid()]
        self.assertEqual(len(mine), 1, st)
        self.assertEqual(mine[0]["id"], lease.id)
        self.assertEqual(mine[0]["bytes"], lease.size)
        self.assertEqual(mine[0]["tag"], "py-pattern")
        self.assertEqual(st["devices"][0]["leased_bytes"], lease.size)
        self.assertEqual([l.id for l in c.leases()], [lease.id])
        lease.release()
        self.assertTrue(lease.released)
        self.assertIsNone(lease.buffer)
        self.assertIsNone(lease.ptr)
        self.assertEqual(self.leased(), 0)

    def test_sizes_in_bytes_or_strings(self):
        c = self.connect()
        for size, granted in ((1, GRANULE), (GRANULE, GRANULE), ("2M", GRANULE),
                              ("4MiB", 2 * GRANULE), ("0.5M", GRANULE), ("1.5m", GRANULE)):
            with c.lease(size) as lease:
                self.assertEqual(lease.size, granted, size)
        for bad in ("4MB", "1.5", "-1", "x", "", -5):
            with self.assertRaises(ValueError, msg=bad):
                c.lease(bad)
        with self.assertRaises(TypeError):
            c.lease(2.5)

    def test_with_releases_and_release_twice_is_fine(self):
        c = self.connect()
        with c.lease("8M") as lease:
            lease.buffer[:4] = b"abcd"
            self.assertEqual(self.leased(), 8 * MiB)
        self.assertTrue(lease.released)
        self.assertEqual(self.leased(), 0)
        lease.release()  # twice: nothing happens
        lease.release()

    def test_a_view_kept_after_release_does_not_crash(self):
        c = self.connect()
        lease = c.lease("2M")
        view = lease.buffer
        part = view[10:20]  # a view of the view, that the lease cannot take back
        part[:] = b"0123456789"
        lease.release()
        with self.assertRaises(ValueError):
            view[0]  # the lease's own view is released with it
        # The slice still maps the arena: the range stays warm for this client's next lease
        # of that size until the daemon punches it (a trim does at once): then zeros, never
        # a fault.
        c.trim()
        self.assertEqual(bytes(part), b"\0" * 10)
        part[:] = b"x" * 10  # written into memory that is no longer the lease: lost, no crash
        del part
        self.assertEqual(self.leased(), 0)

    def test_close_releases_every_lease(self):
        c = rocmmem.connect(socket=self.sock, name="closer")
        leases = [c.lease("4M") for _ in range(3)]
        self.assertEqual(self.leased(), 12 * MiB)
        c.close()
        self.assertTrue(c.closed)
        self.assertFalse(c.available)
        self.assertTrue(all(l.released and l.buffer is None for l in leases))
        for l in leases:
            l.release()  # after close: nothing to do, no use of freed memory
        self.assertEqual(self.leased(), 0)
        c.close()  # twice
        with self.assertRaises(rocmmem.ClientClosed):
            c.lease("2M")
        with self.assertRaises(rocmmem.ClientClosed):
            c.status()

    def test_garbage_collection_releases_leases_and_closes_clients(self):
        c = self.connect()
        lease = c.lease("6M")
        self.assertEqual(self.leased(), 6 * MiB)
        del lease
        self.assertEqual(self.leased(), 0)
        # A lease that outlives the user's reference to its client keeps the client open.
        c2 = rocmmem.connect(socket=self.sock, name="collected")
        lease = c2.lease("2M")
        client_ref = weakref.ref(c2)
        del c2
        gc.collect()
        self.assertIsNotNone(client_ref())
        lease.buffer[0] = 1
        self.assertEqual(self.leased(), 2 * MiB)
        del lease
        gc.collect()
        self.assertIsNone(client_ref())
        self.wait_status(lambda st: all(x["name"] != "collected" for x in st["clients"]),
                         what="the collected client to disconnect")
        self.assertEqual(self.leased(), 0)

    def test_model_tagged_lease(self):
        c = self.connect()
        m = c.register_model("tagged", model_class="vae")
        with m.use():
            with c.lease("4M", model=m) as lease:
                self.assertIs(lease.model, m)
                st = self.status()
                self.assertEqual(st["leases"][0]["model_id"], m.id)
                model = [x for x in st["models"] if x["id"] == m.id][0]
                self.assertEqual(model["lease_bytes"], 4 * MiB)

    def test_threads_share_a_client(self):
        c = self.connect()
        errors = []

        def churn(seed):
            try:
                for i in range(30):
                    with c.lease("2M", timeout=10) as lease:
                        lease.buffer[0] = (seed + i) & 0xFF
                        if lease.buffer[0] != (seed + i) & 0xFF:
                            raise AssertionError("lost a write")
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=churn, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        self.assertEqual(self.leased(), 0)

    def test_a_waiting_lease_is_granted_when_another_thread_releases(self):
        c = self.connect()
        big = c.lease(BUDGET - 8 * MiB)
        result = {}

        def wait_for_room():
            try:
                with c.lease("16M", timeout=None) as lease:
                    result["size"] = lease.size
            except BaseException as e:
                result["error"] = e

        t = threading.Thread(target=wait_for_room)
        t.start()
        self.wait_status(lambda st: st["queue"], what="the request to queue")
        big.release()  # a thread waiting for memory does not block this one's release
        t.join(10)
        self.assertEqual(result, {"size": 16 * MiB})

    def test_closed_while_another_thread_waits(self):
        c = rocmmem.connect(socket=self.sock, name="closing")
        big = c.lease(BUDGET)
        result = {}

        def wait():
            try:
                c.lease("16M", timeout=2)
            except BaseException as e:
                result["error"] = e

        t = threading.Thread(target=wait)
        t.start()
        self.wait_status(lambda st: st["queue"], what="the request to queue")
        c.close()  # returns at once; the C client is freed once the waiting call returns
        self.assertTrue(big.released)
        t.join(10)
        self.assertFalse(t.is_alive())
        self.assertIsInstance(result.get("error"), rocmmem.Error)
        self.wait_status(lambda st: all(x["name"] != "closing" for x in st["clients"]),
                         what="the closed client to disconnect")

    def test_a_retained_handle_outlives_close(self):
        c = rocmmem.connect(socket=self.sock, name="retained")
        handle = c.retain_handle()
        self.assertIsInstance(handle, int)
        from rocmmem import _native
        lib = _native.load()
        c.close()  # the C client stays until the handle is released
        self.assertEqual(lib.rocmmem_client_backend(handle), b"host")
        self.assertTrue(any(x["name"] == "retained" for x in self.status()["clients"]))
        c.release_handle()
        self.wait_status(lambda st: all(x["name"] != "retained" for x in st["clients"]),
                         what="the client to disconnect at the release")
        with self.assertRaises(rocmmem.ClientClosed):
            c.retain_handle()

    def test_a_forked_child_leaves_the_parents_leases_alone(self):
        c = self.connect()
        lease = c.lease("4M")
        pid = os.fork()
        if pid == 0:  # the child: its copies must neither release nor disconnect
            code = 0
            try:
                try:
                    c.status()
                    code = 2
                except rocmmem.Error:
                    pass
                lease.release()
                c.close()
            except BaseException:
                code = 3
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertFalse(lease.released)
        self.assertEqual(self.leased(), 4 * MiB)
        lease.buffer[0] = 7
        lease.release()
        self.assertEqual(self.leased(), 0)

    def test_leases_released_at_exit_of_a_process(self):
        p = self.python("""
            c = rocmmem.connect(socket=SOCK, name="exiter")
            keep = [c.lease("4M") for _ in range(2)]
            say("holding", os.getpid())
            sys.stdin.read() if False else None
            """, name="exiter")
        self.assertEqual(p.wait(30), 0, p)
        self.wait_client_gone(p.pid)
        self.assertEqual(self.leased(), 0)


if __name__ == "__main__":
    unittest.main()
