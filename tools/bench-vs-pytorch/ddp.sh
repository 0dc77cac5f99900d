#!/usr/bin/env bash
# Times data-parallel training of ResNet-20 on loopback: ours (train --workers P --pipeline
# dense) against PyTorch DistributedDataParallel with gloo, same model, batch and optimizer, in
# one run, and prints global samples/s and their ratio. See README.md in this folder.
set -euo pipefail

usage() {
	cat <<'EOF2'
Usage: tools/bench-vs-pytorch/ddp.sh [options]

  --procs LIST      comma-separated process counts (default 2,4)
  --steps N         timed steps per run (default 30)
  --warmup N        untimed steps before them, on both sides (default 3)
  --batch N         batch per process (default 32)
  --repeats N       runs per side and process count, alternating ours and PyTorch; the table
                    gives medians (default 1)
  -h, --help        this text

Both rates are wall-clock: every rank's samples over the time from the end of the last
warm-up step to the end of the last step, everything a step loop does included (ours reads
it from metrics.csv, whose rows carry the time since training began).

Each process gets max(1, cores / P) threads on both sides: GOMAXPROCS for ours (the launcher
sets it), torch.set_num_threads for PyTorch. May install python3-torch with apt-get, as run.sh
does, and says so before it does.
EOF2
}

procs=2,4
steps=30
warmup=3
batch=32
repeats=1
while (($#)); do
	case $1 in
	--procs) procs=${2:?--procs needs a list}; shift ;;
	--steps) steps=${2:?--steps needs a number}; shift ;;
	--warmup) warmup=${2:?--warmup needs a number}; shift ;;
	--batch) batch=${2:?--batch needs a number}; shift ;;
	--repeats) repeats=${2:?--repeats needs a number}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "ddp.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
for v in "$steps" "$warmup" "$batch" "$repeats" ${procs//,/ }; do
	[[ $v =~ ^[1-9][0-9]*$ ]] || { echo "ddp.sh: expected a positive integer, got $v" >&2; exit 2; }
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
[[ -f go.mod && -d nets ]] || { echo "ddp.sh: $root does not look like the ssfusion repository" >&2; exit 1; }
command -v go >/dev/null || { echo "ddp.sh: the go command is not on the PATH" >&2; exit 1; }
# shellcheck source=../lib.sh
source "$here/../lib.sh"
ensure_torch

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "==> Building ours"
go build -o "$tmp/ssfusion" .
cores=$(nproc)
echo "==> $cores cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(go version | cut -d' ' -f3); PyTorch $("$py" -c 'import torch; print(torch.__version__)')"

# ours prints the global samples/s of one data-parallel run with p workers, timed as
# torch_ddp.py times its steps: from the end of the last warm-up step to the end of the last
# step, on rank 0's clock, whose metrics.csv rows carry the wall time since training began.
# summary.json's throughput would leave out what a step loop does besides the step (loading
# the batch, logging, the ranks' agreement on divergence) and count step 2 on, warm-up and all.
ours() {
	local p=$1 out=$tmp/ours-$1-$2
	"$tmp/ssfusion" train --model resnet20 --dataset synthetic --workers "$p" --pipeline dense \
		--batch-size "$batch" --max-steps $((warmup + steps)) --eval-every 100000 --eval-samples 64 \
		--lr 0.1 --momentum 0.9 --weight-decay 5e-4 --out "$out" >"$out.log" 2>&1 || {
		echo "ddp.sh: our run failed (workers $p):" >&2
		tail -20 "$out.log" >&2
		return 1
	}
	"$py" - "$out/metrics.csv" "$warmup" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["kind"] == "train"]
warmup = int(sys.argv[2])
timed = rows[warmup:]
rate = sum(int(r["samples"]) for r in timed) / (float(timed[-1]["wall_s"]) - float(rows[warmup - 1]["wall_s"]))
# comm_ms: the time an allreduce was in flight during the step; wait_ms: the part of it the
# step spent blocked, which backward did not hide.
comm = sum(float(r["comm_ms"] or 0) for r in timed) / len(timed)
wait = sum(float(r["wait_ms"] or 0) for r in timed) / len(timed)
print(f"ours: {rate:.1f} samples/s over {len(timed)} steps, allreduce in flight {comm:.1f} ms a step, waited on {wait:.1f} ms", file=sys.stderr)
print(f"{rate:.1f} {comm:.2f} {wait:.2f}")
PY
}

theirs() {
	local p=$1
	OMP_NUM_THREADS=$((cores / p > 0 ? cores / p : 1)) OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} \
		"$py" "$here/torch_ddp.py" --procs "$p" --threads $((cores / p > 0 ? cores / p : 1)) \
		--batch "$batch" --iters "$steps" --warmup "$warmup"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

row() { printf '| %-9s | %14s | %14s | %12s | %16s | %18s |\n' "$@"; }
table=$(
	row processes "ours" "PyTorch DDP" "ours/PyTorch" "ours: allreduce" "of it behind compute"
	row --------- -------------- -------------- ------------ ---------------- ------------------
)
for p in ${procs//,/ }; do
	: >"$tmp/o" && : >"$tmp/t"
	for ((r = 1; r <= repeats; r++)); do
		echo "==> $p processes, run $r of $repeats: ours (load average $(cut -d' ' -f1 /proc/loadavg))"
		ours "$p" "$r" >>"$tmp/o"
		echo "==> $p processes, run $r of $repeats: PyTorch DDP"
		theirs "$p" >>"$tmp/t"
	done
	o=$(cut -d' ' -f1 "$tmp/o" | median)
	comm=$(cut -d' ' -f2 "$tmp/o" | median)
	wait=$(cut -d' ' -f3 "$tmp/o" | median)
	t=$(median <"$tmp/t")
	# The wait also counts handing the result back, so with no overlap it can pass comm a
	# little: that reads as 0%.
	hidden=$(awk -v c="$comm" -v w="$wait" 'BEGIN { if (c > 0) printf "%.0f%%", (c > w ? 100 * (c - w) / c : 0); else print "-" }')
	table+=$'\n'$(row "$p" "$(printf '%.1f' "$o")" "$(printf '%.1f' "$t")" "$(awk -v a="$o" -v b="$t" 'BEGIN { printf "%.2f", a / b }')" \
		"$(printf '%.1f ms/step' "$comm")" "$hidden")
done

echo
echo "ResNet-20, 3x32x32 synthetic images, batch $batch per process, SGD (momentum 0.9, weight decay"
echo "5e-4), loopback; global samples/s over $steps timed steps after $warmup warm-up steps, wall-clock,"
echo "median of $repeats run(s) per side. ours: allreduce is the time per step an allreduce of ours was in"
echo "flight; of it behind compute, the share the step did not wait for (it ran during backward)."
echo
echo "$table"
