#!/bin/bash
# ring-slopes.sh LOG: issue 17's ring-step ratio from perf.sh latency's
# log, two ways. Whole: time(allgather_ring) / 7 and time(allreduce_ring)
# / 14 against time(pingpong, 16 hops) / 16. Slope: the difference of two
# step counts of one plan shape, which cancels what a run costs besides
# its steps (launching 2 or 8 kernels, their start and handshake, the
# end): (ringsteps at 10 - at 7) / 3 against (pingpong 16 - 4) / 12.
# A step's time is the first table row's time column after its "== NAME:"
# line; steps run twice ("_again") are averaged.
awk '
/^== / { name = $2; sub(/:$/, "", name); seen = 0; next }
/^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +[0-9.]+ / && !seen {
  base = name; sub(/_again$/, "", base); t[base] += $5; c[base]++; seen = 1
}
function v(k) { return c[k] ? t[k] / c[k] : -1 }
function ratio(name, step, steps, hop, hops) {
  if (v(step) < 0 || v(hop) < 0) { printf "# %s: missing %s or %s\n", name, step, hop; return }
  printf "# %s: %.2f us / %d = %.2f us a step, %.2f us / %d = %.2f us a hop: %.2f\n", name, v(step), steps, v(step) / steps, v(hop), hops, v(hop) / hops, (v(step) / steps) / (v(hop) / hops)
}
function slope(name, s1, s0, ds, h1, h0, dh,   st, hp) {
  if (v(s1) < 0 || v(s0) < 0 || v(h1) < 0 || v(h0) < 0) { printf "# %s: missing a step\n", name; return }
  st = (v(s1) - v(s0)) / ds; hp = (v(h1) - v(h0)) / dh
  printf "# %s: step (%.2f - %.2f) / %d = %.2f us, hop (%.2f - %.2f) / %d = %.2f us", name, v(s1), v(s0), ds, st, v(h1), v(h0), dh, hp
  if (hp > 0) printf ": %.2f", st / hp
  printf "\n"
}
END {
  ratio("whole allgather_ring", "allgather_ring8", 7, "pingpong16", 16)
  ratio("whole allreduce_ring", "allreduce_ring8", 14, "pingpong16", 16)
  ratio("whole allreduce_ring -D per=7", "allreduce_ring8_per7", 14, "pingpong16", 16)
  ratio("whole allgather_ring, SIGNAL_SCOPE_GPU=1", "allgather_ring8_gpuscope", 7, "pingpong16_gpuscope", 16)
  ratio("whole allreduce_ring, SIGNAL_SCOPE_GPU=1", "allreduce_ring8_gpuscope", 14, "pingpong16_gpuscope", 16)
  slope("slope ring step / hop", "ringsteps10", "allgather_ring8", 3, "pingpong16", "pingpong4", 12)
  slope("slope, SIGNAL_SCOPE_GPU=1", "ringsteps10_gpuscope", "allgather_ring8_gpuscope", 3, "pingpong16_gpuscope", "pingpong4_gpuscope", 12)
}' "$1"
