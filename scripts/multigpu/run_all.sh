#!/usr/bin/env bash
# run_all.sh: the whole issue-5 run (several GPUs over NVLink against NCCL)
# on one machine, from the repository root, results into $OUT.
#
#   bash scripts/multigpu/run_all.sh [PHASE ...]
#
# PHASES run in the order given (default: all, in this order)
#   topo     nvidia-smi topo -m, nvidia-smi -L, and the project's own view
#            ($GPU_DIR/runtime_topo.test -test.run 'Topo|Discover' -test.v)
#   check    msccl-bench -c for every library algorithm (algorithms/*.msccl)
#            and every non-switch peer fixture (testdata/peer-plans), at
#            RANKS ranks, CHECK_DTYPES x CHECK_SIZES (f32 f16 bf16 x 1K 1M 256M)
#   ours     msccl-bench --json for every allreduce/allgather library
#            algorithm, BENCH_B..BENCH_E (1K..1G, factor 2), BENCH_DTYPE,
#            eager and graph (-G)
#   nccl     scripts/multigpu/nccl_bench.py through torchrun, one process per
#            GPU, same sizes, dtype and modes
#   compare  scripts/multigpu/compare.py for allreduce/allgather x eager/graph
#
# It finds the GPU count itself (NGPU overrides). With one GPU it is a dry
# run: msccl-bench still runs RANKS ranks (default 8 there, all on device 0,
# as msccl-bench does today anyway) and NCCL runs as a world of one, so every
# command runs but no figure says anything about NVLink.
#
# The device tool brings back at most 8 files from $OUT, so $OUT gets:
#   run_all.log, summary.md, results.tar.gz (every raw file), and up to four
#   cmp_<collective>_<mode>.png plots.
# Phases run in separate calls (each call has 10 minutes) still work:
# results.tar.gz of one call holds that call's raw files; compare.py runs
# anywhere (python3 only) over the unpacked files.
#
# Environment (defaults in brackets):
#   OUT [/tmp/issue5-out]  GPU_DIR [.gpu]  NGPU [auto]  RANKS [NGPU, or 8 on 1 GPU]
#   CHECK_DTYPES [f32 f16 bf16]  CHECK_SIZES [1K 1M 256M]
#   BENCH_DTYPE [f16]  BENCH_B [1K]  BENCH_E [1G]  ITERS [20]  WARMUP [5]
#   MODES [eager graph]  COLLS [allreduce allgather]
#   CHECK_RANKS [RANKS]: rank counts of the check phase, e.g. "2 4 8"
#   BUDGET_S [0: none]: check and ours start no new msccl-bench command once
#                       this many seconds have passed since the start
#   CHECK_BUDGET_S, OURS_BUDGET_S [0: none]: the same, counted from the start
#                       of the check / ours phase
#   STEP_TIMEOUT [300]: seconds one msccl-bench command may run
#   NCCL_TIMEOUT [600]: seconds the torchrun of nccl_bench.py may run
#   MSCCL_BENCH_ARGS []: extra arguments for every msccl-bench call
#   QUICK=1: dry-run subset (CHECK_SIZES="1K 1M", BENCH_E=64M, ITERS=10, WARMUP=3)
#
# NVLink multicast stays off everywhere: NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 are exported
# (a different value in the caller's environment stops the script), and
# switch-channel plans are not run.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
here=scripts/multigpu
OUT=${OUT:-${TMPDIR:-/tmp}/issue5-out}
mkdir -p "$OUT"
LOG=$OUT/run_all.log
SUM=$OUT/summary.md
if [ -z "${_RUN_ALL_TEED:-}" ]; then
  # everything below once more, its output also into $LOG
  _RUN_ALL_TEED=1 OUT=$OUT bash "$0" "$@" 2>&1 | tee -a "$LOG"
  exit "${PIPESTATUS[0]}"
fi
W=$(mktemp -d /tmp/mgpu.XXXXXX)

for kv in NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1; do
  k=${kv%%=*}; v=${kv#*=}
  if [ -n "${!k:-}" ] && [ "${!k}" != "$v" ]; then
    echo "run_all: $k=${!k} in the environment; NVLink multicast must stay off ($kv). Stopping."; exit 2
  fi
  export "$kv"
done

if [ "${QUICK:-0}" = 1 ]; then
  : "${CHECK_SIZES:=1K 1M}" "${BENCH_E:=64M}" "${ITERS:=10}" "${WARMUP:=3}"
fi
GPU_DIR=${GPU_DIR:-.gpu}
BENCH=$GPU_DIR/bin/msccl-bench
CHECK_DTYPES=${CHECK_DTYPES:-f32 f16 bf16}
CHECK_SIZES=${CHECK_SIZES:-1K 1M 256M}
BENCH_DTYPE=${BENCH_DTYPE:-f16}
BENCH_B=${BENCH_B:-1K}
BENCH_E=${BENCH_E:-1G}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
MODES=${MODES:-eager graph}
COLLS=${COLLS:-allreduce allgather}
BUDGET_S=${BUDGET_S:-0}
STEP_TIMEOUT=${STEP_TIMEOUT:-300}
read -r -a XARGS <<< "${MSCCL_BENCH_ARGS:-}"

if [ -z "${NGPU:-}" ]; then
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  [ "${NGPU:-0}" -gt 0 ] || NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
fi
if [ "$NGPU" -lt 1 ]; then echo "run_all: no GPU found"; exit 1; fi
DRY=0
if [ "$NGPU" -eq 1 ]; then DRY=1; fi
RANKS=${RANKS:-$([ "$DRY" = 1 ] && echo 8 || echo "$NGPU")}
CHECK_RANKS=${CHECK_RANKS:-$RANKS}
NCCL_TIMEOUT=${NCCL_TIMEOUT:-600}
T0=$(date +%s)
phases=("$@"); [ ${#phases[@]} -gt 0 ] || phases=(topo check ours nccl compare)

# over_budget: the whole run's BUDGET_S or the phase's PHASE_BUDGET is spent
over_budget() {
  local now; now=$(date +%s)
  { [ "$BUDGET_S" -gt 0 ] && [ $((now - T0)) -ge "$BUDGET_S" ]; } ||
    { [ "${PHASE_BUDGET:-0}" -gt 0 ] && [ $((now - PHASE_T0)) -ge "$PHASE_BUDGET" ]; }
}
has_phase() { local p; for p in "${phases[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
note() { echo "$*" | tee -a "$SUM"; }

echo "# run_all.sh $(date -u +%FT%TZ) on $(hostname): $NGPU GPU(s), RANKS=$RANKS, dry run=$DRY, phases: ${phases[*]}"
echo "# git: $(git rev-parse --short HEAD 2>/dev/null || echo '?') $(git status --porcelain 2>/dev/null | wc -l) changed file(s)"
echo "# NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS"
{
  echo "# issue 5 run: $(date -u +%FT%TZ)"
  echo
  if [ "$DRY" = 1 ]; then
    echo "**1-GPU DRY RUN**: every command of the multi-GPU run, on one GPU. msccl-bench runs $RANKS ranks on device 0; NCCL is a world of one. No figure here measures NVLink or compares with NCCL at the same rank count."
    echo
  fi
  echo "- machine: $NGPU GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sort | uniq -c | sed 's/^ *//' | tr '\n' ';')"
  echo "- ranks for msccl-bench: $RANKS; NCCL world size: $NGPU"
  echo "- NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE (multicast off)"
  echo
} > "$SUM"

if [ ! -x "$BENCH" ] && { has_phase check || has_phase ours; }; then
  echo "run_all: $BENCH is missing (build it with scripts/gpu-pack, or set GPU_DIR); skipping check and ours"
  note "- msccl-bench missing at $BENCH: correctness and our timings not run"
fi
if [ -x "$BENCH" ] && ! "$BENCH" -h 2>&1 | grep -qi 'device'; then
  echo "run_all: note: this msccl-bench has no device option; it places all ranks on device 0, so its times are one GPU's, not NVLink's"
  note "- msccl-bench places all $RANKS ranks on device 0 (no device option yet): its times do not measure NVLink"
fi

# ALGO_ARGS for library algorithm $1 at $2 ranks (hierarchical ones: two
# emulated nodes of $2/2 GPUs)
algo_args() {
  local f=algorithms/$1.msccl
  ALGO_ARGS=(--algo "$1" --ranks "$2")
  if grep -q 'param gpus_per_node' "$f" && [ $(($2 % 2)) -eq 0 ]; then
    ALGO_ARGS+=(-D nodes=2 -D "gpus_per_node=$(($2 / 2))")
  fi
}

# ---------------------------------------------------------------- topo
phase_topo() {
  echo "== topo"
  { nvidia-smi -L; echo; nvidia-smi topo -m; echo; nvidia-smi nvlink --status 2>&1 | head -80; } > "$W/topo_nvidia_smi.txt" 2>&1
  cat "$W/topo_nvidia_smi.txt"
  if [ -x "$GPU_DIR/runtime_topo.test" ]; then
    (cd runtime/topo && timeout 120 "$root/$GPU_DIR/runtime_topo.test" -test.run 'Topo|Discover' -test.v -test.count=1) > "$W/topo_project.txt" 2>&1
    echo "runtime_topo.test rc=$?" >> "$W/topo_project.txt"
    cat "$W/topo_project.txt"
  else
    echo "no $GPU_DIR/runtime_topo.test: the project's topology view is not shown" | tee "$W/topo_project.txt"
  fi
  { echo "## topology"; echo; echo '```'; cat "$W/topo_nvidia_smi.txt"; echo '```'; echo; echo "project view (runtime/topo):"; echo; echo '```'; grep -v '^=== RUN\|^--- \|^PASS\|^ok' "$W/topo_project.txt"; echo '```'; echo; } >> "$SUM"
}

# ---------------------------------------------------------------- check
phase_check() {
  [ -x "$BENCH" ] || return 0
  echo "== check: ranks [$CHECK_RANKS] dtypes [$CHECK_DTYPES] sizes [$CHECK_SIZES]"
  : > "$W/check.jsonl"; : > "$W/check_errors.txt"
  targets=()
  for n in $CHECK_RANKS; do
    for f in algorithms/*.msccl; do targets+=("algo:$(basename "$f" .msccl):$n"); done
  done
  for f in testdata/peer-plans/*.json; do
    [ -f "$f" ] || continue
    if grep -q '"switch"' "$f"; then echo "skip $f: switch channels (NVLink multicast)"; continue; fi
    targets+=("plan:$f")
  done
  for t in "${targets[@]}"; do
    for dt in $CHECK_DTYPES; do
      for s in $CHECK_SIZES; do
        if over_budget; then echo "budget spent: stopping check at $t $dt $s"; break 3; fi
        if [ "${t%%:*}" = algo ]; then IFS=: read -r _ an ar <<< "$t"; algo_args "$an" "$ar"; else ALGO_ARGS=(--plan "${t#plan:}"); fi
        cmd=("$BENCH" "${ALGO_ARGS[@]}" -b "$s" -e "$s" -d "$dt" -o sum -c -n 1 -w 0 --json "${XARGS[@]}")
        out=$(timeout "$STEP_TIMEOUT" "${cmd[@]}" 2>&1); rc=$?
        printf '%s\n' "$out" | grep '^{' >> "$W/check.jsonl"
        if [ $rc -ne 0 ]; then
          printf 'rc=%s %s\n%s\n' "$rc" "${cmd[*]}" "$(printf '%s\n' "$out" | grep -v '^{' | tail -5)" >> "$W/check_errors.txt"
          echo "FAIL rc=$rc ${t} $dt $s: $(printf '%s\n' "$out" | grep -v '^{' | tail -1)"
        else
          echo "ok ${t} $dt $s: $(printf '%s\n' "$out" | grep '^{' | python3 -c 'import sys,json
for l in sys.stdin:
    r=json.loads(l); print("skipped: "+r["skipped"] if r.get("skipped") else "wrong=%d time=%.1fus" % (r["wrong"], r["time_us"]))')"
        fi
      done
    done
  done
  python3 - "$W/check.jsonl" "$W/check_errors.txt" >> "$SUM" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
errs = [l for l in open(sys.argv[2]) if l.startswith("rc=")]
ok = [r for r in rows if not r.get("skipped") and r.get("wrong") == 0]
bad = [r for r in rows if not r.get("skipped") and r.get("wrong", -1) != 0]
sk = [r for r in rows if r.get("skipped")]
print("## correctness (msccl-bench -c against the CPU executor)\n")
print(f"{len(rows)} rows: {len(ok)} bit-identical, {len(bad)} with wrong elements, {len(sk)} skipped; {len(errs)} commands failed\n")
plans = sorted({r["plan"] for r in rows})
if rows:
    print("| plan | ranks | rows | identical | wrong | skipped |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for p in plans:
        rr = [r for r in rows if r["plan"] == p]
        print(f"| {p} | {rr[0]['ranks']} | {len(rr)} | {sum(1 for r in rr if not r.get('skipped') and r.get('wrong') == 0)} | "
              f"{sum(1 for r in rr if not r.get('skipped') and r.get('wrong', -1) != 0)} | {sum(1 for r in rr if r.get('skipped'))} |")
    print()
for r in bad:
    print(f"- WRONG: {r['plan']} {r['type']} {r['bytes']} B: {r.get('wrong')} elements")
for r in sk[:20]:
    print(f"- skipped: {r['plan']} {r['type']} {r['bytes']} B: {r['skipped']}")
for e in errs[:20]:
    print(f"- failed: {e.strip()}")
print()
PY
}

# ---------------------------------------------------------------- ours
phase_ours() {
  [ -x "$BENCH" ] || return 0
  echo "== ours: $BENCH_DTYPE $BENCH_B..$BENCH_E, modes [$MODES], RANKS=$RANKS"
  for coll in $COLLS; do
    for f in algorithms/${coll}_*.msccl; do
      a=$(basename "$f" .msccl)
      for mode in $MODES; do
        if over_budget; then echo "budget spent: stopping ours at $a $mode"; break 3; fi
        g=(); [ "$mode" = graph ] && g=(-G)
        algo_args "$a" "$RANKS"
        cmd=("$BENCH" "${ALGO_ARGS[@]}" -b "$BENCH_B" -e "$BENCH_E" -f 2 -d "$BENCH_DTYPE" -o sum -n "$ITERS" -w "$WARMUP" "${g[@]}" --json "${XARGS[@]}")
        echo "\$ ${cmd[*]}"
        timeout "$STEP_TIMEOUT" "${cmd[@]}" > "$W/ours_${coll}_${mode}_${a}.jsonl" 2> "$W/ours_${coll}_${mode}_${a}.err"; rc=$?
        [ $rc -eq 0 ] || echo "FAIL rc=$rc: $(tail -2 "$W/ours_${coll}_${mode}_${a}.err")"
        python3 -c 'import sys,json
rows=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("  %d rows; " % len(rows) + ", ".join("%s:%s" % (r["bytes"], "skip" if r.get("skipped") else "%.1fus" % r["time_us"]) for r in rows[::4]))' "$W/ours_${coll}_${mode}_${a}.jsonl"
      done
    done
  done
}

# ---------------------------------------------------------------- nccl
phase_nccl() {
  {
    echo "== nccl: torchrun --nproc_per_node=$NGPU, $BENCH_DTYPE $BENCH_B..$BENCH_E, modes [$MODES]"
    rm -f "$W/nccl.jsonl"
    cmd=(torchrun --standalone --nproc_per_node="$NGPU" $here/nccl_bench.py
         --collectives "$(echo $COLLS | tr ' ' ,)" --modes "$(echo $MODES | tr ' ' ,)"
         -b "$BENCH_B" -e "$BENCH_E" -f 2 -d "$BENCH_DTYPE" -o sum -n "$ITERS" -w "$WARMUP" -c --jsonl "$W/nccl.jsonl")
    command -v torchrun >/dev/null || cmd=(python3 -m torch.distributed.run "${cmd[@]:1}")
    echo "\$ ${cmd[*]}"
    PYTHONUNBUFFERED=1 timeout "$NCCL_TIMEOUT" "${cmd[@]}"; rc=$?
    [ $rc -eq 0 ] || { echo "FAIL: nccl_bench rc=$rc"; note "- nccl_bench failed (rc=$rc), see run_all.log"; }
  }
}

# ---------------------------------------------------------------- compare
phase_compare() {
  echo "== compare"
  echo "## msccl-bench against NCCL ($BENCH_DTYPE)" >> "$SUM"
  echo >> "$SUM"
  for coll in $COLLS; do
    for mode in $MODES; do
      ls "$W"/ours_${coll}_${mode}_*.jsonl >/dev/null 2>&1 && [ -s "$W/nccl.jsonl" ] || { note "- $coll $mode: no rows to compare"; continue; }
      python3 $here/compare.py --collective "$coll" --dtype "$BENCH_DTYPE" --mode "$mode" \
        --ours "$W/ours_${coll}_${mode}_*.jsonl" --nccl "$W/nccl.jsonl" \
        --md "$W/cmp_${coll}_${mode}.md" --plot "$OUT/cmp_${coll}_${mode}.png" \
        --title "$coll $BENCH_DTYPE $mode, $NGPU GPU(s)$([ "$DRY" = 1 ] && echo ', 1-GPU DRY RUN')" > /dev/null
      cat "$W/cmp_${coll}_${mode}.md" | tee -a "$SUM"
      echo >> "$SUM"
    done
  done
}

for p in "${phases[@]}"; do
  case $p in
    topo|check|ours|nccl|compare)
      PHASE_T0=$(date +%s); PHASE_BUDGET=0
      [ "$p" = check ] && PHASE_BUDGET=${CHECK_BUDGET_S:-0}
      [ "$p" = ours ] && PHASE_BUDGET=${OURS_BUDGET_S:-0}
      "phase_$p" ;;
    *) echo "run_all: unknown phase $p (topo check ours nccl compare)" ;;
  esac
done

echo "== done in $(( $(date +%s) - T0 )) s"
note "(run_all.sh: $(( $(date +%s) - T0 )) s)"
cp "$SUM" "$W/" 2>/dev/null
tar -C "$W" -czf "$OUT/results.tar.gz" . && echo "raw files: $OUT/results.tar.gz ($(ls "$W" | wc -l) files)"
rm -rf "$W"
