"""Tests of the msccl package against the library it was installed with.

capi/python_test.go installs the package (pip install --no-build-isolation
--target) and runs these with the environment below; by hand:

    MSCCL_LIBRARY=/tmp/libmsccl.so PYTHONPATH=python python3 -m unittest discover -s python/tests

MSCCL_SOURCE: the msccl-go checkout (default: two levels up).
MSCCL_COMPILE: an msccl-compile binary, for the byte-for-byte comparisons.
MSCCL_TEST_TARGET: where the package was installed; the tests check that
is the copy they import.
"""

import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import unittest

import msccl
from msccl import _lib

SOURCE = os.environ.get("MSCCL_SOURCE") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPILE = os.environ.get("MSCCL_COMPILE", "")
RING = os.path.join(SOURCE, "algorithms", "allreduce_ring.msccl")
WRONG = os.path.join(SOURCE, "testdata", "wrong")

# The corpus proofs run with these byte-level types (compiler/wrong_corpus_test.go).
CORPUS_DTYPES = ["f32", "bf16", "i32"]


def txtar(path):
    """The files of a txtar archive, name -> text."""
    files, name, lines = {}, None, []
    with open(path) as f:
        for line in f.read().splitlines(keepends=True):
            s = line.rstrip("\n")
            if s.startswith("-- ") and s.endswith(" --") and len(s) > 6:
                if name is not None:
                    files[name] = "".join(lines)
                name, lines = s[3:-3], []
            elif name is not None:
                lines.append(line)
    if name is not None:
        files[name] = "".join(lines)
    return files


class Installed(unittest.TestCase):
    def test_imports_the_installed_copy(self):
        target = os.environ.get("MSCCL_TEST_TARGET")
        if not target:
            self.skipTest("MSCCL_TEST_TARGET not set (run by hand)")
        self.assertTrue(os.path.realpath(msccl.__file__).startswith(os.path.realpath(target)), msccl.__file__)
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(msccl.__file__), "libmsccl.so")))

    def test_version(self):
        self.assertTrue(msccl.library_version().startswith("libmsccl "), msccl.library_version())
        self.assertEqual(_lib.lib().msccl_abi_version(), msccl.ABI_VERSION)

    def test_torch_is_not_imported(self):
        # torch is optional: importing msccl must not pull it in.
        out = subprocess.run([sys.executable, "-c", "import sys, msccl; msccl.compile; print('torch' in sys.modules)"],
                             capture_output=True, text=True, check=True)
        self.assertEqual(out.stdout.strip(), "False")


class Compile(unittest.TestCase):
    def test_path_and_params(self):
        p = msccl.compile(RING, ranks=4)
        self.assertEqual((p.name, p.collective, p.ranks, p.protocol), ("allreduce_ring", "allreduce", 4, "Simple"))
        self.assertTrue(p.from_source)
        self.assertEqual(str(p.size_rule), "multiples of 16 bytes from 64 bytes")
        self.assertTrue(p.size_rule.admits(1 << 20))
        self.assertFalse(p.size_rule.admits(1000))
        p8 = msccl.compile(RING, ranks=8)
        self.assertEqual(p8.ranks, 8)

    def test_pathlike_and_source(self):
        import pathlib
        a = msccl.compile(pathlib.Path(RING), ranks=2)
        with open(RING) as f:
            b = msccl.compile(f.read(), ranks=2, filename=RING)  # the file's name names the plan
        self.assertEqual(a.to_json(), b.to_json())

    def test_path_that_is_no_file(self):
        # A path without its .msccl, or one that does not exist, is not
        # taken for program text (a syntax error at 1:1) but named.
        stem = RING[: -len(".msccl")]
        with self.assertRaises(FileNotFoundError) as cm:
            msccl.compile(stem, ranks=4)
        self.assertIn("no such file", str(cm.exception))
        self.assertIn("did you mean %r" % RING, str(cm.exception))
        self.assertEqual(cm.exception.filename, stem)
        with self.assertRaises(FileNotFoundError) as cm:
            msccl.compile("algorithms/nonesuch")
        self.assertNotIn("did you mean", str(cm.exception))

    def test_diagnostic_positions(self):
        src = "collective allreduce\nparam ranks = 2\non rank(0) tb 0 {\n  cpy rank(0).input[0] -> rank(0).output[0]\n}\n"
        with self.assertRaises(msccl.CompileError) as cm:
            msccl.compile(src)
        e = cm.exception
        self.assertEqual((e.file, e.line, e.col), ("<string>", 4, 3))
        self.assertEqual(e.summary, 'unknown op "cpy"')
        self.assertIn('did you mean "copy"', str(e))
        self.assertTrue(e.diagnostics[0].code, e.diagnostics[0])
        self.assertTrue(str(e).startswith("<string>:4:3: error: "), str(e))
        with self.assertRaises(msccl.CompileError) as cm:
            msccl.compile(src, filename="mine.msccl")
        self.assertEqual(cm.exception.file, "mine.msccl")

    def test_every_error_is_reported(self):
        src = "collective allreduce\nparam ranks = 2\non rank(0) tb 0 {\n  cpy rank(0).input[0] -> rank(0).output[0]\n  cpyy rank(0).input[0] -> rank(0).output[0]\n}\n"
        with self.assertRaises(msccl.CompileError) as cm:
            msccl.compile(src)
        self.assertGreaterEqual(len(cm.exception.errors), 2)
        self.assertEqual([d.line for d in cm.exception.errors][:2], [4, 5])

    def test_unknown_param(self):
        with self.assertRaises(msccl.CompileError) as cm:
            msccl.compile(RING, rank=4)
        self.assertEqual((cm.exception.file, cm.exception.line, cm.exception.col), (RING, 1, 1))
        self.assertIn('did you mean "ranks"', str(cm.exception))

    def test_bad_input(self):
        with self.assertRaises(FileNotFoundError):
            msccl.compile("no/such/file.msccl")
        with self.assertRaises(FileNotFoundError):
            msccl.load("no/such/plan.json")
        with self.assertRaises(TypeError):
            msccl.compile(42)
        with self.assertRaises(TypeError):
            msccl.compile(RING, ranks="4")
        with self.assertRaises(TypeError):
            msccl.compile(RING, ranks=True)
        with self.assertRaises(TypeError):
            msccl.compile(RING, filename=3)
        with self.assertRaises(TypeError):
            msccl.loads(3)
        with self.assertRaises(msccl.PlanError) as cm:
            msccl.loads("{")
        self.assertEqual(cm.exception.diagnostics[0].code, "plan.syntax")
        with self.assertRaises(msccl.PlanError) as cm:
            msccl.loads('{"name": 1}')
        self.assertIn("name", [d.path for d in cm.exception.diagnostics])
        with self.assertRaises(ValueError):
            msccl.Plan(0)


class Verify(unittest.TestCase):
    def test_correct(self):
        p = msccl.compile(RING, ranks=4)
        r = p.verify()
        self.assertTrue(r.ok)
        self.assertTrue(r)
        self.assertEqual((r.verdict, r.mode, r.findings), ("correct", "proof", []))
        self.assertIn("64 bytes, symbolic", r.runs)
        r = p.verify(1 << 20, dtype="f16", op="max", launches=3)
        self.assertEqual((r.ok, r.verdict, r.mode, r.size, r.dtype, r.op, r.launches), (True, "correct", "run", 1 << 20, "f16", "max", 3))
        r = p.verify("1MiB", symbolic=True)
        self.assertEqual((r.ok, r.size, r.dtype), (True, 1 << 20, "symbolic"))
        self.assertIs(r.check(), r)

    def test_fixed_reduction(self):
        # option reduce = max fixes the plan to max: the proof covers max
        # alone, a run names it by default, and another one is refused.
        with open(RING) as f:
            src = f.read().replace("collective allreduce chunks ranks inplace", "collective allreduce chunks ranks inplace\noption reduce = max", 1)
        p = msccl.compile(src, filename="ring_max.msccl", ranks=4)
        self.assertEqual(p.reduction, "max")
        self.assertEqual(msccl.compile(RING, ranks=4).reduction, "")
        self.assertTrue(p.verify().ok)
        r = p.verify(4096)
        self.assertEqual((r.ok, r.op), (True, "max"))
        self.assertEqual(p.check_reduction("max"), "max")
        for op in ("sum", "min"):
            with self.assertRaises(ValueError) as cm:
                p.verify(4096, op=op)
            self.assertIn("serves reduction max only", str(cm.exception))

    def test_proof_at_chosen_sizes(self):
        p = msccl.compile(RING, ranks=4)
        r = p.verify(sizes=["1K", 4096], dtype="i32")
        self.assertTrue(r.ok)
        self.assertEqual(r.runs, ["1024 bytes, symbolic", "1024 bytes, i32", "4096 bytes, symbolic", "4096 bytes, i32"])
        with self.assertRaises(ValueError):
            p.verify(1024, sizes=[1024])
        with self.assertRaises(TypeError):
            p.verify(sizes=1024)
        with self.assertRaises(ValueError):
            p.verify(sizes=[0])

    def test_pickle(self):
        import pickle
        p = msccl.compile(RING, ranks=3)
        q = pickle.loads(pickle.dumps(p))
        self.assertEqual((q.to_bytes(), q.name, q.from_source), (p.to_bytes(), p.name, False))

    def corpus(self, name):
        ar = txtar(os.path.join(WRONG, name + ".txtar"))
        p = msccl.compile(ar["input.msccl"], filename="input.msccl")
        return p, ar

    def assert_golden(self, name, verdict, kind):
        """The proof from Python finds what the Go corpus golden says,
        message for message, at the same positions."""
        p, ar = self.corpus(name)
        r = p.verify(dtype=CORPUS_DTYPES)
        self.assertFalse(r.ok)
        self.assertFalse(r)
        self.assertEqual(r.verdict, verdict)
        self.assertEqual([f.message for f in r.findings], ar["diagnostics"].strip().splitlines())
        self.assertIn(kind, r.kinds())
        self.assertTrue(all(f.code.startswith("proof.") for f in r.findings), [f.code for f in r.findings])
        for f in r.findings:
            self.assertEqual(f.file, "input.msccl")
            self.assertGreater(f.line, 0)
        with self.assertRaises(msccl.NotCorrect) as cm:
            r.check()
        self.assertIs(cm.exception.result, r)
        return r

    def test_deadlock(self):
        r = self.assert_golden("wrong_deadlock_1", "deadlock", "deadlock")
        self.assertEqual([(f.line, f.col) for f in r.findings], [(8, 5)])

    def test_race(self):
        self.assert_golden("wrong_launchrace_1", "race", "race")

    def test_wrong_result(self):
        self.assert_golden("wrong_chunk_1", "wrong result", "wrong result")

    def test_clobbered_input(self):
        self.assert_golden("wrong_clobber_1", "wrong result", "clobbered")

    def test_unbalanced(self):
        self.assert_golden("wrong_unbalanced_3", "unbalanced", "unbalanced")

    def test_rejected_by_the_compiler(self):
        # Some wrong schedules never reach the proof: the compiler's own
        # checks reject them, with the golden diagnostics.
        ar = txtar(os.path.join(WRONG, "wrong_unbalanced_1.txtar"))
        with self.assertRaises(msccl.CompileError) as cm:
            msccl.compile(ar["input.msccl"], filename="input.msccl")
        self.assertEqual([d.message for d in cm.exception.errors], ar["diagnostics"].strip().splitlines())
        self.assertEqual((cm.exception.line, cm.exception.col), (7, 5))

    def test_one_run_of_a_wrong_plan(self):
        p, _ = self.corpus("wrong_deadlock_1")
        r = p.verify(32, dtype="i32")
        self.assertEqual((r.ok, r.verdict, r.mode, r.runs), (False, "deadlock", "run", ["32 bytes, i32"]))
        self.assertEqual({(f.kind, f.code, f.line, f.col) for f in r.findings}, {("deadlock", "proof.deadlock", 8, 5)})

    def test_loaded_plan_findings_name_paths(self):
        p, _ = self.corpus("wrong_deadlock_1")
        q = msccl.loads(p.to_json())
        self.assertFalse(q.from_source)
        r = q.verify()
        self.assertEqual(r.verdict, "deadlock")
        self.assertTrue(all("gpus[" in f.message for f in r.findings), [f.message for f in r.findings])

    def test_bad_arguments(self):
        p = msccl.compile(RING, ranks=2)
        for kw, exc in [({"size": 0}, ValueError), ({"size": -5}, ValueError), ({"size": 1.5}, TypeError), ({"size": True}, TypeError),
                        ({"size": 1024, "dtype": "f99"}, ValueError), ({"size": 1024, "dtype": ["f32"]}, TypeError),
                        ({"size": 1024, "op": "avg"}, ValueError), ({"size": 1024, "launches": 0}, ValueError),
                        ({"size": 1024, "ll": 4}, ValueError), ({"op": "sum"}, ValueError), ({"launches": 2}, ValueError),
                        ({"symbolic": True}, ValueError), ({"dtype": 7}, TypeError), ({"size": "lots"}, msccl.InvalidArgument)]:
            with self.subTest(kw=kw):
                with self.assertRaises(exc):
                    p.verify(**kw)
        with self.assertRaises(msccl.Error) as cm:
            p.verify(1000)  # outside the plan's size rule
        self.assertIn("size rule", str(cm.exception))
        with self.assertRaises(ValueError):
            p.check_size(1000)
        self.assertEqual(p.check_size(1024), 1024)


class Sizes(unittest.TestCase):
    def test_parse_size(self):
        # The library's reader, as msccl-compile and msccl-bench read sizes.
        self.assertEqual([msccl.parse_size(s) for s in ("4096", "64K", "64KiB", "1M", "1MiB", "2g")], [4096, 65536, 65536, 1 << 20, 1 << 20, 2 << 30])
        self.assertEqual(msccl.parse_size(100), 100)
        for bad in ("", "-1", "1.5K", "0x10", "lots"):
            with self.assertRaises(ValueError):
                msccl.parse_size(bad)
        with self.assertRaises(TypeError):
            msccl.parse_size(1.5)


class RoundTrip(unittest.TestCase):
    def go_compile(self, path, defines, out):
        if not COMPILE:
            self.skipTest("MSCCL_COMPILE (an msccl-compile binary) not set")
        args = [COMPILE, "compile", path, "-o", out]
        for k, v in defines.items():
            args += ["-D", "%s=%d" % (k, v)]
        subprocess.run(args, check=True, capture_output=True)
        with open(out, "rb") as f:
            return f.read()

    def test_to_json_matches_msccl_compile(self):
        with tempfile.TemporaryDirectory() as d:
            for algo, defs in [("allreduce_ring", {"ranks": 4}), ("allgather_packet", {"ranks": 3}), ("alltoall_direct", {"ranks": 2}), ("allreduce_allpairs_packet", {"ranks": 8})]:
                with self.subTest(algo=algo):
                    path = os.path.join(SOURCE, "algorithms", algo + ".msccl")
                    want = self.go_compile(path, defs, os.path.join(d, algo + ".go.json"))
                    p = msccl.compile(path, **defs)
                    self.assertEqual(p.to_bytes(), want)
                    self.assertEqual(p.to_json().encode(), want)
                    saved = os.path.join(d, algo + ".py.json")
                    p.save(saved)
                    with open(saved, "rb") as f:
                        self.assertEqual(f.read(), want)
                    q = msccl.load(saved)
                    self.assertEqual(q.to_bytes(), want)
                    self.assertEqual((q.name, q.ranks), (p.name, p.ranks))

    def test_cli_compile_matches(self):
        with tempfile.TemporaryDirectory() as d:
            want = self.go_compile(RING, {"ranks": 4}, os.path.join(d, "go.json"))
            out = os.path.join(d, "py.json")
            r = subprocess.run([sys.executable, "-m", "msccl", "compile", RING, "-D", "ranks=4", "-o", out], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("proven correct for every message size in its rule", r.stderr)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), want)
            r = subprocess.run([sys.executable, "-m", "msccl", "compile", RING, "-D", "ranks=4"], capture_output=True)
            self.assertEqual(r.stdout, want)


    def test_cli_json_diagnostics_match(self):
        if not COMPILE:
            self.skipTest("MSCCL_COMPILE (an msccl-compile binary) not set")
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "bad.msccl")
            with open(src, "w") as f:
                f.write("collective allreduce\nparam ranks = 2\nbogus\ncpy rank(0).input[0] -> rank(1).output[0]\n")
            go = subprocess.run([COMPILE, "compile", src, "--json"], capture_output=True, text=True)
            py = subprocess.run([sys.executable, "-m", "msccl", "compile", src, "--json"], capture_output=True, text=True)
            self.assertEqual((go.returncode, py.returncode), (1, 1))
            self.assertIn('"code":', go.stderr)
            self.assertEqual(py.stderr, go.stderr)


class Select(unittest.TestCase):
    def test_select(self):
        p = msccl.select("allreduce", 8, 1 << 20)
        self.assertEqual((p.collective, p.ranks), ("allreduce", 8))
        self.assertTrue(p.size_rule.admits(1 << 20))
        self.assertTrue(p.verify(1 << 20, dtype="bf16"))

    def test_bad(self):
        with self.assertRaises(ValueError):
            msccl.select("allreducee", 8, 1024)
        with self.assertRaises(TypeError):
            msccl.select("allreduce", "8", 1024)
        with self.assertRaises(ValueError):
            msccl.select("allreduce", 0, 1024)
        with self.assertRaises(msccl.SelectError) as cm:
            msccl.select("allreduce", 8, 1)
        self.assertIn("no allreduce plan for 8 ranks covers 1 bytes", str(cm.exception))
        with self.assertRaises(msccl.SelectError):
            msccl.select("allreduce", 8, 1024, table="no/such/selection.yaml")


class ABI(unittest.TestCase):
    def test_panic_becomes_an_error(self):
        with self.assertRaises(msccl.InternalError) as cm:
            _lib.call("msccl_selftest_panic")
        self.assertIn("a deliberate panic", str(cm.exception))
        # ... and the library still works.
        self.assertEqual(msccl.compile(RING, ranks=2).ranks, 2)

    def test_status_classes(self):
        # Each status is its own exception class; a failed run
        # (MSCCL_ERR_RUN: a watchdog, a broken communicator) is not an
        # input problem.
        for status, cls in ((_lib.ERR_INVALID, msccl.InvalidArgument), (_lib.ERR_INTERNAL, msccl.InternalError),
                            (_lib.ERR_RUN, msccl.RunError), (_lib.ERR_INPUT, msccl.Error)):
            e = _lib.error_for(status, "m")
            self.assertIs(type(e), cls, status)
            self.assertIsInstance(e, msccl.Error)

    def test_stale_handles(self):
        p = msccl.compile(RING, ranks=2)
        p.close()
        with self.assertRaises(msccl.InvalidArgument):
            p.to_json()
        with self.assertRaises(msccl.InvalidArgument):
            _lib.call("msccl_release", 1 << 40)
        out = ctypes.c_void_p()
        with self.assertRaises(msccl.InvalidArgument) as cm:
            _lib.call("msccl_verify", 1 << 40, b"", ctypes.byref(out))
        self.assertIn("no plan with handle", str(cm.exception))
        with self.assertRaises(msccl.InvalidArgument):
            _lib.call("msccl_plan_info", 1, None)  # NULL output pointer
        h = ctypes.c_int64()
        with self.assertRaises(msccl.InvalidArgument) as cm:
            _lib.call("msccl_compile", b"x", None, 10, None, ctypes.byref(h), None)  # NULL source, 10 bytes
        self.assertIn("src is NULL", str(cm.exception))

    def test_handles_are_released(self):
        gc.collect()
        before = _lib.lib().msccl_live_handles()
        for _ in range(5):
            msccl.compile(RING, ranks=2)
            with msccl.compile(RING, ranks=3):
                pass
        gc.collect()
        self.assertEqual(_lib.lib().msccl_live_handles(), before)

    def test_threads(self):
        # Library calls run in parallel (ctypes drops the GIL); each thread
        # compiles, proves and encodes its own plans.
        want = {n: msccl.compile(RING, ranks=n).to_bytes() for n in (2, 3, 4)}
        errors, results = [], []

        def work(n):
            try:
                for _ in range(3):
                    p = msccl.compile(RING, ranks=n)
                    results.append((n, p.to_bytes(), p.verify(p.size_rule.min * 4, dtype="i32").ok))
                    try:
                        msccl.compile("collective allreduce\nparam ranks = 2\nbogus\n")
                    except msccl.CompileError as e:
                        assert e.line == 3, e
            except Exception as e:  # reported below
                errors.append(e)

        ts = [threading.Thread(target=work, args=(n,)) for n in (2, 3, 4) * 2]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 18)
        for n, data, ok in results:
            self.assertEqual(data, want[n])
            self.assertTrue(ok)


class CLI(unittest.TestCase):
    def run_cli(self, *args):
        return subprocess.run([sys.executable, "-m", "msccl"] + list(args), capture_output=True, text=True)

    def test_verify(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "dl.msccl")
            with open(src, "w") as f:
                f.write(txtar(os.path.join(WRONG, "wrong_deadlock_1.txtar"))["input.msccl"])
            r = self.run_cli("verify", src)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("deadlock", r.stdout)
            self.assertIn("dl.msccl:8:5: error: deadlock", r.stdout)
            r = self.run_cli("compile", src, "-o", os.path.join(d, "x.json"))
            self.assertEqual(r.returncode, 1)
            self.assertIn("no plan written", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "x.json")))
            r = self.run_cli("verify", RING, "-D", "ranks=4", "--size", "1MiB", "--dtype", "f16", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            v = json.loads(r.stdout)
            self.assertEqual((v["ok"], v["mode"], v["size"], v["dtype"]), (True, "run", 1 << 20, "f16"))

    def test_errors(self):
        r = self.run_cli("compile", "no/such.msccl")
        self.assertEqual(r.returncode, 1)
        self.assertIn("No such file", r.stderr)
        r = self.run_cli("compile")
        self.assertEqual(r.returncode, 2)
        r = self.run_cli("compile", RING, "-D", "ranks")
        self.assertEqual(r.returncode, 2)
        r = self.run_cli("verify", RING, "-D", "ranks=4", "--op", "max")
        self.assertEqual(r.returncode, 2)
        self.assertIn("give --size too", r.stderr)
        r = self.run_cli("compile", RING, "-D", "rank=4")
        self.assertEqual(r.returncode, 1)
        self.assertIn(":1:1: error: -D rank: the program declares no param rank", r.stderr)


class Example(unittest.TestCase):
    def test_prove_example(self):
        path = os.path.join(SOURCE, "examples", "python", "prove.py")
        r = subprocess.run([sys.executable, path], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("proven correct", r.stdout)
        self.assertIn("deadlock", r.stdout)


if __name__ == "__main__":
    unittest.main()
