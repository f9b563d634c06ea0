"""python -m msccl bench --procs: how the launcher passes the secret and
ends a job (Linux: it reads /proc)."""

import os
import signal
import subprocess
import sys
import time
import unittest

LONG = ["bench", "--procs", "2", "--collective", "allgather", "-b", "1K", "-e", "1K", "-n", "10000000", "-w", "0", "-d", "i32"]


def children(pid):
    """pids whose parent is pid."""
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % e) as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2:].split()[1] == str(pid):
            out.append(int(e))
    return out


def proc_file(pid, name):
    with open("/proc/%d/%s" % (pid, name), "rb") as f:
        return f.read()


def alive(pid):
    """pid exists and is not a zombie."""
    try:
        stat = proc_file(pid, "stat").decode()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:][:1] != "Z"


@unittest.skipUnless(os.path.exists("/proc/self/stat"), "needs /proc")
class Launcher(unittest.TestCase):
    def start(self, *extra):
        """The launcher on a sweep that runs for minutes, and its ranks'
        pids by rank."""
        p = subprocess.Popen([sys.executable, "-m", "msccl"] + LONG + list(extra), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (p.poll() is None and p.kill(), p.wait()))
        ranks = {}
        deadline = time.monotonic() + 30
        while len(ranks) < 2:
            if time.monotonic() > deadline:
                self.fail("the launcher did not start its ranks")
            for k in children(p.pid):
                try:
                    env = proc_file(k, "environ").split(b"\0")
                except OSError:
                    continue
                for kv in env:
                    if kv.startswith(b"MSCCL_RANK="):
                        ranks[int(kv[len(b"MSCCL_RANK="):])] = k
            time.sleep(0.05)
        # Under way: every rank past the rendezvous.
        time.sleep(1.0)
        return p, ranks

    def assert_gone(self, ranks):
        for r, pid in ranks.items():
            deadline = time.monotonic() + 5
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
                self.fail("rank %d (pid %d) outlived the launcher" % (r, pid))

    def test_secret_not_on_command_line_and_ranks_die_with_launcher(self):
        p, ranks = self.start()
        uid = None
        for kv in proc_file(ranks[1], "environ").split(b"\0"):
            if kv.startswith(b"MSCCL_UNIQUE_ID="):
                uid = kv[len(b"MSCCL_UNIQUE_ID="):]
        self.assertIsNotNone(uid, "rank 1's environment has no MSCCL_UNIQUE_ID: the test looks in the wrong place")
        secret = uid.rsplit(b":", 1)[1]
        self.assertEqual(len(secret), 32)
        for pid in [p.pid] + list(ranks.values()):
            self.assertNotIn(secret, proc_file(pid, "cmdline"), "pid %d's command line holds the secret" % pid)
        # Killed outright, the launcher takes its ranks with it.
        p.kill()
        p.wait()
        self.assert_gone(ranks)

    def test_stopped_rank_ends_the_job(self):
        p, ranks = self.start("--stop-limit", "1")
        stopped = time.monotonic()
        os.kill(ranks[1], signal.SIGSTOP)
        try:
            _, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(ranks[1], signal.SIGKILL)
            self.fail("the launcher still runs 20 s after rank 1 stopped (limit 1 s)")
        took = time.monotonic() - stopped
        self.assertNotEqual(p.returncode, 0, err)
        self.assertIn("rank 1 (pid %d) was stopped" % ranks[1], err)
        self.assertLess(took, 8, err)
        self.assert_gone(ranks)

    def test_failed_rank_ends_the_job(self):
        p, ranks = self.start()
        os.kill(ranks[0], signal.SIGKILL)
        try:
            _, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.fail("the launcher still runs 20 s after rank 0 was killed")
        self.assertNotEqual(p.returncode, 0, err)
        self.assertIn("rank 0 (pid %d) was killed by SIGKILL" % ranks[0], err)
        self.assert_gone(ranks)

    def test_sigterm_ends_the_job(self):
        p, ranks = self.start()
        p.send_signal(signal.SIGTERM)
        try:
            _, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.fail("the launcher still runs 10 s after SIGTERM")
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("the launcher got SIGTERM", err)
        self.assert_gone(ranks)


if __name__ == "__main__":
    unittest.main()
