"""The communicator: a 4-process job on the cpu device, from Python."""

import os
import subprocess
import sys
import unittest

import msccl

SOURCE = os.environ.get("MSCCL_SOURCE") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RING = os.path.join(SOURCE, "algorithms", "allreduce_ring.msccl")
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "comm_worker.py")


class Communicator(unittest.TestCase):
    def test_four_processes(self):
        # Every collective, on library plans and a compiled one, checked
        # against its definition in each rank (comm_worker.py).
        world = 4
        uid = msccl.unique_id()
        procs = [subprocess.Popen([sys.executable, WORKER, uid, str(r), str(world), RING],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(world)]
        outs = []
        try:
            for p in procs:
                outs.append(p.communicate(timeout=150)[0])
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for r, (p, out) in enumerate(zip(procs, outs)):
            self.assertEqual(p.returncode, 0, "rank %d:\n%s" % (r, out))
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

    def test_bad_arguments(self):
        with self.assertRaises(TypeError):
            msccl.Communicator.from_unique_id(None, 0, 2)
        with self.assertRaises(ValueError):
            msccl.Communicator.from_unique_id("msccl1:127.0.0.1:1:00", 2, 2)
        with self.assertRaises(TypeError):
            msccl.Communicator.from_unique_id("msccl1:127.0.0.1:1:00", "0", 2)
        with self.assertRaises(msccl.Error) as cm:
            msccl.Communicator.from_unique_id("not an id", 0, 2)
        self.assertIn("not an id", str(cm.exception))
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


if __name__ == "__main__":
    unittest.main()
