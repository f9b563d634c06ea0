"""test_comm's job with a rank that dies: rank 1 exits right after joining;
rank 0's next collective must raise msccl.Error naming it, not hang.
argv: unique id, rank."""

import array
import os
import sys
import time

import msccl


def main():
    uid, rank = sys.argv[1], int(sys.argv[2])
    comm = msccl.Communicator.from_unique_id(uid, rank, 2)
    if rank == 1:
        os._exit(3)  # dies without closing anything
    time.sleep(0.5)
    t0 = time.monotonic()
    try:
        for _ in range(100):
            comm.all_reduce(array.array("f", [1.0] * 1024))
    except msccl.Error as e:
        print("error after %.1f s: %s" % (time.monotonic() - t0, e))
        return 0
    print("no error: the collectives ran without rank 1")
    return 1


if __name__ == "__main__":
    sys.exit(main())
