"""Channels in your own kernels from Python (msccl.primitives): handle
arrays built across processes on the cpu device (prim_worker.py), kernels
compiled with NVRTC and the device headers, and the refusals of each."""

import array
import ctypes
import os
import subprocess
import sys
import unittest

import jobs
import msccl

SOURCE = os.environ.get("MSCCL_SOURCE") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prim_worker.py")
EXAMPLES = os.path.join(SOURCE, "examples", "python")

KERNEL = r"""
#include <msccl/msccl.cuh>
extern "C" __global__ void ping(msccl::MemoryChannel* ch, int n) {
  if (threadIdx.x == 0 && blockIdx.x < n) { ch[blockIdx.x].signal(); ch[blockIdx.x].wait(); }
}
"""


def compile_or_skip(test, src, name):
    try:
        return msccl.Kernel(src, name, arch="compute_90")
    except msccl.Error as e:
        if "NVRTC library not found" in str(e):
            test.skipTest("no NVRTC library: %s" % e)
        raise


class Job(unittest.TestCase):
    def test_three_processes(self):
        # Register refusals on every rank alike, memory channels whose
        # handles hold the layout kernels/handles.go gives (the peer's
        # buffer and semaphore reached through them), port channels whose
        # FIFO the proxy serves: a put, a signal and a flush pushed from
        # Python arrive at the successor.
        for r, (code, out) in enumerate(jobs.run_ranks(WORKER, 3)):
            self.assertEqual(code, 0, "rank %d:\n%s" % (r, out))
            self.assertIn("rank %d ok" % r, out)


class OneRank(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.comm = msccl.Communicator.from_unique_id(msccl.unique_id(), 0, 1)

    @classmethod
    def tearDownClass(cls):
        cls.comm.close()

    def test_buffer(self):
        with self.comm.alloc_buffer(256) as b:
            self.assertEqual((b.nbytes, b.device), (256, "cpu"))
            self.assertEqual(bytes(b.host()), bytes(256))
            b.host()[:4] = b"abcd"
            self.assertEqual(ctypes.string_at(b.ptr, 4), b"abcd")
            with self.assertRaisesRegex(AttributeError, "cpu device"):
                b.__cuda_array_interface__
        for bad in (0, -1):
            with self.assertRaises(ValueError):
                self.comm.alloc_buffer(bad)

    def test_refusals(self):
        c = self.comm
        with self.assertRaisesRegex(msccl.Error, "host memory of this process"):
            c.register(array.array("f", [0.0] * 64))
        with self.assertRaisesRegex(msccl.Error, "the buffer is empty"):
            c.register(0, 0)
        with self.assertRaisesRegex(TypeError, "needs nbytes"):
            c.register(12345)
        with c.alloc_buffer(1024) as b:
            with self.assertRaisesRegex(TypeError, "peers must be ints"):
                c.memory_channels(b, ["1"])
            with self.assertRaisesRegex(msccl.Error, "peer 0 is the rank itself"):
                c.memory_channels(b, [0])
            with self.assertRaisesRegex(msccl.Error, "channel kind"):
                c._channels("switch", b, [], None)
            # A job of one rank builds no channel: an empty array.
            with c.memory_channels(b, []) as ch:
                self.assertEqual((ch.count, ch.nbytes), (0, 0))
                ch.check()
            with c.register(b) as reg:
                with c.port_channels(reg, []) as ch:
                    self.assertEqual(ch.kind, "port")
            # The registration the channels made for b is closed with them.
            self.assertEqual(msccl._lib.lib().msccl_live_handles(), self._live + 1)

    def setUp(self):
        self._live = msccl._lib.lib().msccl_live_handles()

    def test_launch_refused_off_cuda(self):
        k = compile_or_skip(self, KERNEL, "ping")
        with self.comm.alloc_buffer(64) as b, self.comm.memory_channels(b, []) as ch:
            with self.assertRaisesRegex(msccl.InvalidArgument, "device is cpu; a kernel runs on cuda"):
                k.launch(1, 32, [ch, ctypes.c_int32(1)], comm=self.comm)
            with self.assertRaisesRegex(TypeError, "ctypes.c_float"):
                k.launch(1, 32, [ch, 1.5], comm=self.comm)
            with self.assertRaisesRegex(TypeError, "argument 1 has type str"):
                k.launch(1, 32, [ch, "x"])
            with self.assertRaisesRegex(ValueError, "block must be 1 to 3 positive ints"):
                k.launch(1, (0,), [ch, ctypes.c_int32(1)])
        k.close()
        with self.assertRaisesRegex(msccl.InvalidArgument, "kernel was closed"):
            k.image


class Kernels(unittest.TestCase):
    def test_compile(self):
        with compile_or_skip(self, KERNEL, "ping") as k:
            ptx = k.image.decode()
            self.assertIn(".entry ping", ptx)
        with self.assertRaises(msccl.CompileError) as cm:
            msccl.Kernel(KERNEL.replace("ch[blockIdx.x].wait();", "ch[blockIdx.x].wiat();"), "ping", arch="compute_90")
        self.assertIn("wiat", str(cm.exception))
        self.assertIn("ping.cu(", str(cm.exception))  # NVRTC's log names file and line
        with self.assertRaises(TypeError):
            msccl.Kernel(KERNEL, "")

    def test_include(self):
        path = msccl.include_path()
        self.assertTrue(os.path.isfile(os.path.join(path, "msccl", "msccl.cuh")), path)
        r = subprocess.run([sys.executable, "-m", "msccl", "include"], capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, path), r.stderr)

    def test_examples_compile(self):
        # The kernels of examples/python, compiled as the examples do
        # (they run only on a GPU; this is what CI can check).
        sys.path.insert(0, EXAMPLES)
        try:
            import channels_allgather
        finally:
            sys.path.remove(EXAMPLES)
        for name, src in channels_allgather.KERNELS.items():
            with compile_or_skip(self, src, name) as k:
                self.assertIn(".entry " + name, k.image.decode())


if __name__ == "__main__":
    unittest.main()
