#!/usr/bin/env bash
# One short lease of a GPU box (no network), in one command:
#   set-up from a carried wheelhouse, then a light sweep of every adapter at n=512 (each case
#   verified against the reference before it is timed), and, where asked, verify on CUDA, the
#   timer/IQR/null goals, fused bf16 against the floor and which SpikingJelly kernels run.
# Usage (repository root, on the box):  bash benchmarks/gpu_lease.sh WHEELHOUSE OUTDIR BUDGET_S [CONFIG]
#   CONFIG: the sweep (default benchmarks/gpu-lease.toml)
#   LEASE_STEPS: which optional steps run, a comma list of verify, timers, sj-kernels,
#     exodus-graph (default: the first three; exodus-graph compiles sinabs-exodus, ~75 s on 16
#     cores, then verifies the EXODUS adapters' graph builds on the shipped conv example)
#   RUN_S: seconds for the sweep (default 400)
#   SJ_NATIVE=1: build SpikingJelly's native CUDA operators beside the set-up (longer than a
#     15-minute lease allows on 16 cores); else SpikingJelly is installed pure (Triton and torch
#     backends) after the set-up.
# Every step is time-boxed against BUDGET_S; logs and run folders go to OUTDIR/lease.tar.gz.
set -u
wheels=${1:?wheelhouse}; out=${2:?out folder}; budget=${3:-520}; config=${4:-benchmarks/gpu-lease.toml}
steps=",${LEASE_STEPS-verify,timers,sj-kernels},"
wants() { [[ $steps == *",$1,"* ]]; }
work=results/gpu-lease; mkdir -p "$work"
left() { echo $(( budget - SECONDS )); }
box() { # box SECONDS NAME CMD...: run CMD with at most SECONDS (and never past the budget)
  local limit=$1 name=$2; shift 2
  local cap; cap=$(left); cap=$(( cap - 25 )); (( limit > cap )) && limit=$cap
  if (( limit < 10 )); then echo "== $name: skipped, budget spent" | tee -a "$work/steps.txt"; return; fi
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >"$work/$name.log" 2>&1; local rc=$?
  echo "== $name: exit $rc in $(( SECONDS - t0 )) s (limit $limit s)" | tee -a "$work/steps.txt"
  tail -n 25 "$work/$name.log"
}
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv | tee "$work/gpu.txt"
sj=
if [[ ${SJ_NATIVE-} == 1 ]]; then  # SpikingJelly's native CUDA build (CPU-bound) beside the set-up
  timeout -k 5 220 python3 -m snnbench.gpu_setup install --wheelhouse "$wheels" --arch-list 9.0 \
    --only spikingjelly --max-jobs 12 >"$work/setup-sj.log" 2>&1 &
  sj=$!
fi
box 150 setup python3 -m snnbench.gpu_setup install --wheelhouse "$wheels" --arch-list 9.0 \
  --skip spikingjelly,sinabs-exodus --max-jobs 4
if [[ -z $sj ]]; then  # SpikingJelly and loguru (its import needs it) at the GPU lock's pins
  mapfile -t sj_pins < <(grep -E '^(spikingjelly|loguru)==' snnbench/locks/requirements-gpu.txt)
  box 60 setup-sj-pure python3 -m pip install --no-deps --no-build-isolation --no-index \
    --find-links "$wheels" "${sj_pins[@]}"
fi
wants verify && box 130 verify python3 -m snnbench verify --device cuda --reset both --neurons 256 \
  --surrogate sigmoid --surrogate-slope 4 --adapters all --timeout 100
if wants exodus-graph; then  # sinabs-exodus (left out of the set-up above), then its graph build
  box 150 setup-exodus python3 -m snnbench.gpu_setup install --wheelhouse "$wheels" --arch-list 9.0 \
    --only sinabs-exodus --max-jobs 12
  box 90 verify-exodus-graph python3 -m snnbench verify --device cuda --network example:conv \
    --dt 1e-3 --adapters sinabs-exodus,rockpool-exodus,sinabs --timeout 60
fi
[[ -n $sj ]] && { wait $sj; echo "== setup-sj: exit $? at $SECONDS s" | tee -a "$work/steps.txt"; tail -n 8 "$work/setup-sj.log"; }
wants timers && box 70 timers-fp32 python3 benchmarks/gpu_timers.py --device cuda --samples 15 \
  --cases fused:512,fused::cudagraph:512,fused::chunked:512,torch:512,floor:512,null:512,fused:4096,fused::chunked:4096,floor:4096
wants timers && box 50 timers-bf16 python3 benchmarks/gpu_timers.py --device cuda --samples 11 --dtype bfloat16 \
  --cases fused:512,fused::cudagraph:512,fused::chunked:512,floor:512,fused:2048,fused::cudagraph:2048,fused::chunked:2048,floor:2048,fused:4096,fused::chunked:4096,floor:4096
wants sj-kernels && box 35 sj-kernels python3 benchmarks/sj_kernels.py --device cuda --neurons 512
# RUN_S: the sweep's time box (a headline lease: LEASE_STEPS= RUN_S=640 with
# benchmarks/headline-strict.toml, then headline-amp.toml in a second lease); the run folder
# keeps every case that finished, and `run --resume` on the next lease does the rest
box "${RUN_S:-400}" run python3 -m snnbench run --config "$config" --out "$work/run"
python3 -m snnbench report "$work/run" >"$work/report.log" 2>&1
echo "== total $SECONDS s" | tee -a "$work/steps.txt"
tar czf "$out/lease.tar.gz" "$work" build/gpu-setup 2>/dev/null
