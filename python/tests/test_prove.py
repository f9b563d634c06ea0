"""Rank consistency from Python: Plan.verify's proof says whether every
rank receives the same bits (docs/consistency.md), as msccl-compile
compile does, and require_consistent refuses a plan that is not.

Run as the other tests are (capi/python_test.go, or by hand with
MSCCL_LIBRARY and PYTHONPATH; see test_msccl.py).
"""

import os
import subprocess
import sys
import tempfile
import unittest

import msccl
from test_msccl import txtar

SOURCE = os.environ.get("MSCCL_SOURCE") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPILE = os.environ.get("MSCCL_COMPILE", "")
RING = os.path.join(SOURCE, "algorithms", "allreduce_ring.msccl")
# Each rank adds every peer's input to its own: correct, and from three
# ranks on not rank-consistent.
ONESHOT = os.path.join(SOURCE, "testdata", "consistency", "allreduce_oneshot.msccl")


class ProveConsistency(unittest.TestCase):
    def test_prove_ring_is_consistent(self):
        res = msccl.compile(RING, ranks=4).verify(require_consistent=True)
        self.assertTrue(res.ok, res)
        self.assertIs(res.consistent, True)
        self.assertTrue(res.consistency.startswith("rank-consistent: yes"), res.consistency)
        self.assertEqual(res.consistency_reason, "")
        self.assertIn(res.consistency, str(res))

    def test_prove_oneshot_is_not_consistent(self):
        res = msccl.compile(ONESHOT, ranks=3).verify()
        self.assertTrue(res.ok, res)  # correct, yet its ranks may differ in the last bits
        self.assertEqual(res.verdict, "correct")
        self.assertIs(res.consistent, False)
        self.assertTrue(res.consistency.startswith("rank-consistent: no, rank "), res.consistency)
        self.assertTrue(res.consistency_reason.startswith("the plan is not rank-consistent: rank "), res.consistency_reason)
        res.check()  # not required: no exception

    def test_prove_require_consistent_refuses(self):
        p = msccl.compile(ONESHOT, ranks=3)
        res = p.verify(require_consistent=True)
        self.assertFalse(res.ok)
        self.assertEqual(res.verdict, "not rank-consistent")
        self.assertIs(res.consistent, False)
        with self.assertRaises(msccl.NotCorrect) as cm:
            res.check()
        self.assertIn("output byte", str(cm.exception))
        self.assertEqual(str(cm.exception), res.consistency_reason)

    def test_prove_consistency_needs_the_proof(self):
        p = msccl.compile(RING, ranks=2)
        with self.assertRaisesRegex(ValueError, "require_consistent asks the proof"):
            p.verify(1024, require_consistent=True)
        with self.assertRaises(TypeError):
            p.verify(require_consistent="yes")
        run = p.verify(1024)
        self.assertIsNone(run.consistent)
        self.assertEqual(run.consistency, "")

    def test_prove_unproven_plan_has_no_consistency(self):
        # A deadlock: nothing is said about consistency, required or not.
        src = txtar(os.path.join(SOURCE, "testdata", "wrong", "wrong_deadlock_1.txtar"))["input.msccl"]
        res = msccl.compile(src).verify(require_consistent=True)
        self.assertFalse(res.ok)
        self.assertNotEqual(res.verdict, "not rank-consistent")
        self.assertIsNone(res.consistent)

    def test_prove_cli_matches_msccl_compile(self):
        with tempfile.TemporaryDirectory() as d:
            for path, defs in ((RING, "ranks=4"), (ONESHOT, "ranks=3")):
                out = os.path.join(d, os.path.basename(path) + ".json")
                py = subprocess.run([sys.executable, "-m", "msccl", "compile", path, "-D", defs, "-o", out], capture_output=True, text=True)
                self.assertEqual(py.returncode, 0, py.stderr)
                last = py.stderr.strip().splitlines()[-1]
                self.assertTrue(last.startswith(path + ": rank-consistent: "), py.stderr)
                req = subprocess.run([sys.executable, "-m", "msccl", "compile", path, "-D", defs, "-o", out + "2", "--require-consistent"],
                                     capture_output=True, text=True)
                if path == ONESHOT:
                    self.assertEqual(req.returncode, 1, req.stderr)
                    self.assertIn("no plan written (drop --require-consistent to write it anyway)", req.stderr)
                    self.assertFalse(os.path.exists(out + "2"))
                else:
                    self.assertEqual(req.returncode, 0, req.stderr)
                if COMPILE:
                    # Both print the same consistency line and refusal.
                    go = subprocess.run([COMPILE, "compile", path, "-D", defs, "-o", os.path.join(d, "go.json")], capture_output=True, text=True)
                    self.assertEqual(go.stderr.strip().splitlines()[-1], last)
                    goreq = subprocess.run([COMPILE, "compile", path, "-D", defs, "-o", os.path.join(d, "go2.json"), "--require-consistent"],
                                           capture_output=True, text=True)
                    self.assertEqual((goreq.returncode, goreq.stderr.strip().splitlines()[-1]), (req.returncode, req.stderr.strip().splitlines()[-1]))


if __name__ == "__main__":
    unittest.main()
