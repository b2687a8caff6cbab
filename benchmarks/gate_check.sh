#!/usr/bin/env bash
# The gate's done-when checks on this machine, under load (issue 32), as a new maintainer would
# run them. Usage (repository root, .venv set up):
#   bash benchmarks/gate_check.sh OUT [AA_RUNS] [PLANTED_RUNS] [SLOW15_RUNS]
# - A/A: AA_RUNS (default 21) single-process runs of one command, one after another; run i is
#   compared with run i+1 (AA_RUNS - 1 pairs). Must give 0 regression, 0 improved.
# - planted: PLANTED_RUNS (default 10) runs of snntorch@post1, @post2 (2x forward) and @post3
#   (identical) with --replicates 3, then SLOW15_RUNS (default PLANTED_RUNS) runs of @post1 and
#   @post4 (1.5x forward)
#   with --replicates REPLICATES (default 5); post1 is compared with each: post2 and post4 must
#   fail, post3 must never be judged.
# LOAD=0 runs without the busy loops (one per core) that otherwise run beside every run.
set -euo pipefail
out=${1:?out folder}; aa=${2:-21}; planted=${3:-10}; slow15=${4:-$planted}
snnbench=${SNNBENCH:-.venv/bin/snnbench}; py=${PYTHON:-.venv/bin/python}
mkdir -p "$out"; tally="$out/tally.txt"; : >"$tally"
pids=()
stop_load() { ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null; pids=(); }
trap stop_load EXIT
if [[ ${LOAD:-1} == 1 ]]; then
    for _ in $(seq "$(nproc)"); do (while :; do :; done) & pids+=($!); done
fi
echo "load: ${#pids[@]} busy loops; $(uptime)" | tee -a "$tally"

mark() { # mark NAME RC: the gate's exit code as a word
    case $2 in 0) echo "$1 pass";; 1) echo "$1 FAIL";; 3) echo "$1 inconclusive";; *) echo "$1 error($2)";; esac
}

small=(--adapters torch,fused,snntorch --neurons 64,256 --steps 25 --batch-size 4)
for i in $(seq "$aa"); do
    "$snnbench" run "${small[@]}" --out "$out/aa$i" >"$out/aa$i.log" 2>&1 || true
    if ((i > 1)); then
        rc=0; "$snnbench" compare "$out/aa$((i - 1))" "$out/aa$i" --format json \
            >"$out/aa$i.compare.json" 2>"$out/aa$i.compare.err" || rc=$?
        echo "$(mark "aa$((i - 1))-aa$i" $rc) $($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["counts"])' "$out/aa$i.compare.json" 2>/dev/null || true)" | tee -a "$tally"
    fi
done

wheel=$(ls "$out"/orig/snntorch-1.0.0-*.whl 2>/dev/null || true)
if [[ -z $wheel ]]; then
    .venv/bin/pip download --quiet --no-deps snntorch==1.0.0 -d "$out/orig"
    wheel=$(ls "$out"/orig/snntorch-1.0.0-*.whl)
fi
"$py" benchmarks/planted_wheels.py "$wheel" "$out/house" --factor 2.0 >/dev/null
"$py" benchmarks/planted_wheels.py "$wheel" "$out/house15" --factor 1.5 >/dev/null
# post4: the 1.5x release (renamed from the 1.5x post2)
"$py" - "$out" <<'PY'
import subprocess, sys, tempfile, pathlib
out = pathlib.Path(sys.argv[1])
src = out / "house15" / "snntorch-1.0.0.post2-py2.py3-none-any.whl"
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, "-m", "wheel", "unpack", str(src), "-d", tmp], check=True, capture_output=True)
    root = pathlib.Path(tmp) / "snntorch-1.0.0.post2"
    info = root / "snntorch-1.0.0.post2.dist-info"
    meta = info / "METADATA"
    meta.write_text(meta.read_text().replace("\nVersion: 1.0.0.post2\n", "\nVersion: 1.0.0.post4\n", 1))
    info.rename(root / "snntorch-1.0.0.post4.dist-info")
    root.rename(root.parent / "snntorch-1.0.0.post4")
    subprocess.run([sys.executable, "-m", "wheel", "pack", str(root.parent / "snntorch-1.0.0.post4"), "-d", str(out / "house")], check=True, capture_output=True)
PY
# one run: release: the identical rebuild (post3) and the 2x one (post2), with --replicates 3
# (the issue's setting); another: the 1.5x one (post4) with REPLICATES (default 5)
judge() { # judge RUN OTHER: compare post1 with OTHER in RUN, one tally line
    local rc=0
    "$snnbench" compare "$1" --envs "snntorch@1.0.0.post1,snntorch@1.0.0.$2" --format json \
        >"$1-$2.json" 2>"$1-$2.err" || rc=$?
    echo "$(mark "$(basename "$1") post1-vs-$2" $rc) $($py -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["counts"], [(p["phase"], round(p["ratio"], 2), p["mark"]) for p in d["pairs"] if p["metric"] == "time_s" and p["adapter"] != "null"])' "$1-$2.json" 2>/dev/null || true)" | tee -a "$tally"
}
sweep=(--wheelhouse "$out/house" --neurons 64 --steps 25 --batch-size 4)
for i in $(seq "$planted"); do
    "$snnbench" run --adapters snntorch@1.0.0.post1,snntorch@1.0.0.post2,snntorch@1.0.0.post3 \
        "${sweep[@]}" --replicates 3 --out "$out/p$i" >"$out/p$i.log" 2>&1 || true
    judge "$out/p$i" post2
    judge "$out/p$i" post3
done
for i in $(seq "$slow15"); do
    "$snnbench" run --adapters snntorch@1.0.0.post1,snntorch@1.0.0.post4 \
        "${sweep[@]}" --replicates "${REPLICATES:-5}" --out "$out/q$i" >"$out/q$i.log" 2>&1 || true
    judge "$out/q$i" post4
done
stop_load
echo "done: $(uptime)" | tee -a "$tally"
