"""The communicator: a 4-process job on the cpu device, from Python."""

import array
import ctypes
import os
import subprocess
import sys
import types
import unittest

import jobs
import msccl

SOURCE = os.environ.get("MSCCL_SOURCE") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RING = os.path.join(SOURCE, "algorithms", "allreduce_ring.msccl")
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "comm_worker.py")


class FakeTensor:
    """Enough of torch.Tensor for the argument checks (torch is not
    installed in CI): contiguity, dtype, device, element count, pointer."""

    __module__ = "torch"

    def __init__(self, n, dtype="torch.float32", device="cpu", contiguous=True, itemsize=4, index=None):
        self._buf = (ctypes.c_char * (n * itemsize))()
        self.dtype, self._n, self._itemsize, self._contiguous = dtype, n, itemsize, contiguous
        if device == "cuda" and index is None:
            index = 0
        self.device = types.SimpleNamespace(type=device, index=index)

    def is_contiguous(self):
        return self._contiguous

    def numel(self):
        return self._n

    def element_size(self):
        return self._itemsize

    def data_ptr(self):
        return ctypes.addressof(self._buf)


class TorchArguments(unittest.TestCase):
    """Tensor checks raise before anything runs, in a job of one process."""

    @classmethod
    def setUpClass(cls):
        for k in [k for k in os.environ if k.startswith(("MSCCL_RANK", "MSCCL_WORLD", "MSCCL_UNIQUE", "RANK", "WORLD_SIZE", "OMPI_", "SLURM_"))]:
            del os.environ[k]
        cls.comm = msccl.Communicator.from_env()

    @classmethod
    def tearDownClass(cls):
        cls.comm.close()

    def test_checks(self):
        c = self.comm
        self.assertEqual((c.rank, c.size), (0, 1))
        with self.assertRaisesRegex(ValueError, "this communicator's device is cpu"):
            c.all_reduce(FakeTensor(256, device="cuda"))
        with self.assertRaisesRegex(ValueError, "contiguous"):
            c.all_reduce(FakeTensor(256, contiguous=False))
        with self.assertRaisesRegex(TypeError, "torch.float64 is not supported"):
            c.all_reduce(FakeTensor(256, dtype="torch.float64", itemsize=8))
        with self.assertRaisesRegex(TypeError, "want the same type"):
            c.all_gather(FakeTensor(256, dtype="torch.bfloat16", itemsize=2), FakeTensor(256))
        with self.assertRaisesRegex(ValueError, "same device"):
            c.all_to_all(FakeTensor(256, device="cuda"), FakeTensor(256))
        with self.assertRaisesRegex(ValueError, "op prod is for integer types"):
            c.all_reduce(FakeTensor(256, dtype="torch.bfloat16", itemsize=2), op="prod")
        with self.assertRaisesRegex(ValueError, "is for 2 ranks; this communicator has 1"):
            c.all_reduce(FakeTensor(256, dtype="torch.int32"), plan=msccl.compile(RING, ranks=2))
        with self.assertRaisesRegex(ValueError, "is for allgather; this call is allreduce"):
            c.all_reduce(FakeTensor(256), plan=msccl.select("allgather", 2, 1024))
        with self.assertRaises(TypeError):
            c.all_reduce(FakeTensor(256), plan="ring.json")
        c.all_reduce(FakeTensor(0))  # nothing to do
        with self.assertRaises(msccl.InvalidArgument):
            comm = msccl.Communicator.from_env()
            comm.close()
            comm.all_reduce(FakeTensor(4))


class FromTorch(unittest.TestCase):
    def test_unique_id_travels_over_the_group(self):
        # A stand-in torch.distributed of one rank: from_torch asks it for
        # the rank and size and broadcasts rank 0's unique id over it.
        calls = []
        dist = types.ModuleType("torch.distributed")
        dist.get_rank = lambda group=None: 0
        dist.get_world_size = lambda group=None: 1
        dist.get_global_rank = lambda group, r: r

        def broadcast_object_list(objs, src=0, group=None):
            calls.append((list(objs), src, group))
        dist.broadcast_object_list = broadcast_object_list
        torch = types.ModuleType("torch")
        torch.distributed = dist
        saved = {k: sys.modules.get(k) for k in ("torch", "torch.distributed")}
        sys.modules.update({"torch": torch, "torch.distributed": dist})
        try:
            with msccl.Communicator.from_torch() as c:
                self.assertEqual((c.rank, c.size, c.device), (0, 1, "cpu"))
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        self.assertEqual(len(calls), 1)
        self.assertTrue(calls[0][0][0].startswith("msccl1:"), calls)
        self.assertEqual(calls[0][1:], (0, None))


class _StandInTorch:
    """torch and torch.distributed stand-ins in sys.modules for a with
    block (torch is not installed in CI): a group of one rank with the
    given backend, one CUDA device current, and a current stream whose
    handle is the test's."""

    def __init__(self, backend="gloo", current=0, stream=0):
        self.broadcasts = []
        dist = types.ModuleType("torch.distributed")
        dist.get_rank = lambda group=None: 0
        dist.get_world_size = lambda group=None: 1
        dist.get_global_rank = lambda group, r: r
        dist.get_backend = lambda group=None: backend
        dist.broadcast_object_list = lambda objs, src=0, group=None: self.broadcasts.append((list(objs), src, group))
        torch = types.ModuleType("torch")
        torch.distributed = dist
        torch.cuda = types.SimpleNamespace(
            is_available=lambda: True, current_device=lambda: current,
            current_stream=lambda device=None: types.SimpleNamespace(cuda_stream=stream))
        self.modules = {"torch": torch, "torch.distributed": dist}

    def __enter__(self):
        self.saved = {k: sys.modules.get(k) for k in self.modules}
        sys.modules.update(self.modules)
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


class CUDAArguments(unittest.TestCase):
    """The cuda device's Python side: device names, the current device
    and stream, fp8 types and prepare. No GPU here: the runs themselves
    are scripts/gpu/torchrun.sh's (python/tests/gpu/torchrun_check.py)."""

    @classmethod
    def setUpClass(cls):
        for k in [k for k in os.environ if k.startswith(("MSCCL_RANK", "MSCCL_WORLD", "MSCCL_UNIQUE", "RANK", "WORLD_SIZE", "OMPI_", "SLURM_"))]:
            del os.environ[k]

    def test_from_torch_nccl_group_means_cuda(self):
        # An NCCL group's ranks run on GPUs: the communicator asks for
        # torch's current device ("cuda:0"), which this machine lacks.
        with _StandInTorch(backend="nccl") as t:
            with self.assertRaises(msccl.Error) as cm:
                msccl.Communicator.from_torch()
        self.assertIn("cuda", str(cm.exception))
        self.assertEqual(len(t.broadcasts), 1)
        with _StandInTorch(backend="gloo"):
            with msccl.Communicator.from_torch() as c:
                self.assertEqual(c.device, "cpu")

    def test_device_names(self):
        for bad in ("cuda:x", "cuda:-1"):
            with self.assertRaisesRegex(msccl.InvalidArgument, "cuda:N"):
                msccl.Communicator.from_env(device=bad)
        with self.assertRaises(TypeError):
            msccl.Communicator.from_env(device=0)

    def test_dtypes(self):
        from msccl.comm import _Buf
        for name, size, want in [("torch.float8_e4m3fn", 1, "f8e4m3"), ("torch.float8_e5m2", 1, "f8e5m2"), ("torch.bfloat16", 2, "bf16"),
                                 ("torch.float16", 2, "f16"), ("torch.int32", 4, "i32"), ("torch.float32", 4, "f32")]:
            b = _Buf(FakeTensor(8, dtype=name, itemsize=size, device="cuda"), "t", True)
            self.assertEqual((b.dtype, b.nbytes, b.device, b.index), (want, 8 * size, "cuda", 0))

    def test_stream_and_device_checks(self):
        # A cpu communicator dressed as a cuda one: the Python side checks
        # the tensors' GPU against torch's current device and passes the
        # current stream, which the cpu library then refuses by name: the
        # proof that the stream reached it.
        with msccl.Communicator.from_env() as c, _StandInTorch(current=0, stream=0xbeef):
            c.device = "cuda"
            with self.assertRaisesRegex(ValueError, r"cuda:1 but the current device is cuda:0; call torch.cuda.set_device"):
                c.all_reduce(FakeTensor(64, device="cuda", index=1))
            with self.assertRaisesRegex(ValueError, "want the same device"):
                c.all_gather(FakeTensor(64, device="cuda", index=1), FakeTensor(64, device="cuda", index=0))
            with self.assertRaisesRegex(ValueError, "tensors are on cpu; this communicator's device is cuda"):
                c.prepare("all_reduce", FakeTensor(64))
            with self.assertRaisesRegex(ValueError, "contiguous"):
                c.prepare("all_reduce", FakeTensor(64, device="cuda", contiguous=False))
            with self.assertRaisesRegex(ValueError, "collective 'allreduce' is not one of"):
                c.prepare("allreduce", FakeTensor(64, device="cuda"))
            with self.assertRaisesRegex(ValueError, "output has 32 elements, want 64"):
                c.prepare("all_gather", FakeTensor(32, device="cuda"), FakeTensor(64, device="cuda"))
            # No plan is for one rank: a 2-rank plan claims one, to get
            # past Python's check to the library's stream check.
            p = msccl.compile(RING, ranks=2)
            p._info = dict(p._info, ranks=1)
            with self.assertRaisesRegex(msccl.InvalidArgument, "pass 0"):
                c.all_reduce(FakeTensor(256, device="cuda"), plan=p)


class Communicator(unittest.TestCase):
    def test_four_processes(self):
        # Every collective, on library plans and a compiled one, checked
        # against its definition in each rank (comm_worker.py).
        for r, (code, out) in enumerate(jobs.run_ranks(WORKER, 4, os.path.join(SOURCE, "algorithms"))):
            self.assertEqual(code, 0, "rank %d:\n%s" % (r, out))
            self.assertIn("rank %d ok" % r, out)

    def test_a_rank_dies(self):
        # Rank 1 exits without a word; rank 0's collective raises
        # msccl.Error naming it instead of hanging (comm_dies.py).
        uid = msccl.unique_id()
        script = os.path.join(os.path.dirname(WORKER), "comm_dies.py")
        procs = [subprocess.Popen([sys.executable, script, uid, str(r)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in range(2)]
        try:
            outs = [p.communicate(timeout=120)[0] for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        self.assertEqual(procs[1].returncode, 3, outs[1])
        self.assertEqual(procs[0].returncode, 0, outs[0])
        self.assertIn("rank 1", outs[0])

    def test_bench(self):
        # msccl-bench's sweep from Python: two ranks, checked.
        r = subprocess.run([sys.executable, "-m", "msccl", "bench", "--procs", "2", "--collective", "allgather", "-b", "1K", "-e", "4K",
                            "-f", "4", "-n", "2", "-w", "1", "-c", "-d", "i32"], capture_output=True, text=True, timeout=150)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = [l.split() for l in r.stdout.splitlines() if l.strip() and not l.startswith("#")]
        self.assertEqual([(row[0], row[2], row[-1]) for row in rows], [("1024", "i32", "0"), ("4096", "i32", "0")], r.stdout)
        r = subprocess.run([sys.executable, "-m", "msccl", "bench", "--procs", "2", "-d", "f64"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        # An empty or endless sweep is a wrong invocation, refused before
        # any rank starts, as msccl-bench refuses it.
        for args, want in ((["-b", "4K", "-e", "1K"], "-b 4096 is above -e 1024: the sweep would be empty"),
                           (["-f", "1"], "-f must be at least 2, got 1")):
            r = subprocess.run([sys.executable, "-m", "msccl", "bench", "--procs", "2"] + args, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(want, r.stderr)

    def test_bad_arguments(self):
        with self.assertRaises(TypeError):
            msccl.Communicator.from_unique_id(None, 0, 2)
        with self.assertRaises(ValueError):
            msccl.Communicator.from_unique_id("msccl1:127.0.0.1:1:00", 2, 2)
        with self.assertRaises(TypeError):
            msccl.Communicator.from_unique_id("msccl1:127.0.0.1:1:00", "0", 2)
        with self.assertRaises(msccl.Error) as cm:
            msccl.Communicator.from_unique_id("not an id", 0, 2)
        # Named, never quoted: an id holds the job's secret.
        self.assertIn("unique id", str(cm.exception))
        self.assertNotIn("not an id", str(cm.exception))
        with self.assertRaises(msccl.Error) as cm:
            msccl.Communicator.from_unique_id(msccl.unique_id(), 0, 1, device="cuda")
        self.assertIn("cuda", str(cm.exception))
        with self.assertRaises(msccl.InvalidArgument):
            msccl.Communicator(1)

    def test_one_process(self):
        # Without launcher variables the environment is a job of one.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MSCCL_RANK", "MSCCL_WORLD", "RANK", "WORLD_SIZE", "OMPI_", "SLURM_"))}
        code = "import msccl\nwith msccl.Communicator.from_env() as c: print(c.rank, c.size, c.device)\n"
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["0", "1", "cpu"])

    def test_world_of_one(self):
        # A world of one rank runs every collective, as a copy (NCCL users
        # debug with one rank first).
        with msccl.Communicator.from_unique_id(msccl.unique_id(), 0, 1) as c:
            t = array.array("f", [float(i) for i in range(1001)])
            c.all_reduce(t)
            self.assertEqual(list(t), [float(i) for i in range(1001)])
            for name in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter", "reduce"):
                out = array.array("f", [0.0] * 1001)
                getattr(c, name)(out, t)
                self.assertEqual(list(out), list(t), name)
            out = array.array("f", [0.0] * 1001)
            c.broadcast(out, t)
            self.assertEqual(list(out), list(t))


if __name__ == "__main__":
    unittest.main()
