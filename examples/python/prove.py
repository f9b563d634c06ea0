"""Compile a schedule from a Python string and prove it on the CPU.

    pip install --no-build-isolation ./python     # once; needs the Go toolchain
    python3 examples/python/prove.py

The first program is a four-rank allgather at the chunk level; the proof
covers every message size its size rule admits, every reduction and type,
and four back-to-back launches. The second is a two-rank allgather with a
hand-written handshake in the wrong order: the proof finds the deadlock
and names the line. Runs in CI (python/tests).
"""

import sys

import msccl

ALLGATHER = """
// Every rank's input goes to its slot of every rank's output. Only the
// data movement is written: the compiler derives the channels, the
// synchronisation and the thread blocks.
collective allgather chunks 1
param ranks = 4
for r in 0..ranks {
  for q in 0..ranks {
    copy rank(r).input[0] -> rank(q).output[r]
  }
}
"""

# A hand-written handshake in the wrong order: both ranks wait for the
# peer's signal before sending their own, so neither gets past its wait.
DEADLOCK = """
collective allgather chunks 1
param ranks = 2
for r in 0..ranks {
  on rank(r) tb 0 {
    wait to 1 - r
    copy rank(r).input[0] -> rank(r).output[r]
    put rank(r).input[0] -> rank(1 - r).output[r]
    nop
    signal to 1 - r
  }
}
"""


def main():
    plan = msccl.compile(ALLGATHER, filename="allgather.msccl")
    result = plan.verify()
    print("%s: %s, %d ranks: %s" % (plan.name, plan.collective, plan.ranks, result.verdict))
    if not result.ok:
        print(result)
        return 1
    print("proven correct for every size in its rule (%s), every reduction and type" % plan.size_rule)
    # One run at a size of our choice, as msccl-compile sim does it.
    print("1 MiB of bf16, 8 launches:", plan.verify("1MiB", dtype="bf16", launches=8).verdict)

    bad = msccl.compile(DEADLOCK, filename="deadlock.msccl")
    result = bad.verify()
    print("%s: %s" % (bad.name, result.verdict))
    for f in result.findings:
        print("  %s:%d:%d: %s" % (f.file, f.line, f.col, f.summary))
    return 0 if result.verdict == "deadlock" else 1


if __name__ == "__main__":
    sys.exit(main())
