"""Run a job of processes on this host, one rank each (the tests' helper)."""

import subprocess
import sys


def run_ranks(script, world, *args, timeout=150):
    """Start script uid rank world *args for every rank with a fresh unique
    id, wait for all, and return [(returncode, output)] by rank; a rank
    still running at the timeout is killed."""
    import msccl
    uid = msccl.unique_id()
    procs = [subprocess.Popen([sys.executable, script, uid, str(r), str(world)] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(world)]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [(p.returncode, out) for p, out in zip(procs, outs)]
