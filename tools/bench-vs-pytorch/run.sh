#!/usr/bin/env bash
# Times our training step (go test -bench TrainStep) and PyTorch's on the same models and shapes,
# in one run, and prints the rates and their ratio. See README.md in this folder.
set -euo pipefail

usage() {
	cat <<'EOF'
Usage: tools/bench-vs-pytorch/run.sh [options]

  --quick           smallest run: 2 timed steps per model and build, 3 warm-up steps for PyTorch
  --iters N         timed steps per model, ours and PyTorch's (default 5)
  --warmup N        untimed steps before PyTorch's timed ones (default 5; ours always does 1)
  --threads N       PyTorch threads, torch.set_num_threads (default 2)
  --models LIST     comma-separated subset of resnet20,vgg16,lstm (default all three)
  --openblas        also measure the -tags openblas build; installs libopenblas-dev if missing
                    (without this flag the openblas build is measured when libopenblas is present)
  --no-openblas     measure the default (pure Go) build only
  -h, --help        this text

May install, with apt-get (as root, or through sudo): python3-torch when `python3 -c 'import
torch'` fails, and libopenblas-dev with --openblas. It says so before doing it.
EOF
}

iters=5
warmup=5 # PyTorch's first steps are slow (allocator, oneDNN set-up): the LSTM needs about 4
threads=2
models=resnet20,vgg16,lstm
openblas=auto # auto: when libopenblas is installed; yes: always (install it); no: never

while (($#)); do
	case $1 in
	--quick) iters=2 warmup=3 ;;
	--iters) iters=${2:?--iters needs a number}; shift ;;
	--warmup) warmup=${2:?--warmup needs a number}; shift ;;
	--threads) threads=${2:?--threads needs a number}; shift ;;
	--models) models=${2:?--models needs a list}; shift ;;
	--openblas) openblas=yes ;;
	--no-openblas) openblas=no ;;
	-h | --help) usage; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
[[ $iters =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --iters must be a positive integer, got $iters" >&2; exit 2; }
[[ $warmup =~ ^[0-9]+$ ]] || { echo "run.sh: --warmup must be a non-negative integer, got $warmup" >&2; exit 2; }
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --threads must be a positive integer, got $threads" >&2; exit 2; }
for m in ${models//,/ }; do
	case $m in resnet20 | vgg16 | lstm) ;; *) echo "run.sh: unknown model $m (valid: resnet20, vgg16, lstm)" >&2; exit 2 ;; esac
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
[[ -f go.mod && -d nets ]] || { echo "run.sh: $root does not look like the ssfusion repository" >&2; exit 1; }
command -v go >/dev/null || { echo "run.sh: the go command is not on the PATH (ours is measured with go test)" >&2; exit 1; }

# shellcheck source=../lib.sh
source "$here/../lib.sh"
ensure_torch

# links_openblas reports whether the C toolchain can link -lopenblas, which the openblas build needs.
links_openblas() {
	local cc=${CC:-gcc}
	command -v "$cc" >/dev/null || return 1
	printf '#include <cblas.h>\nint main(void) { return 0; }\n' | "$cc" -x c - -lopenblas -o /dev/null 2>/dev/null
}

builds=(default)
case $openblas in
yes)
	links_openblas || apt_install "--openblas asks for the OpenBLAS build, and libopenblas cannot be linked yet" libopenblas-dev
	links_openblas || { echo "run.sh: cannot link -lopenblas with ${CC:-gcc} even after installing libopenblas-dev" >&2; exit 1; }
	builds+=(openblas)
	;;
auto)
	if links_openblas; then
		builds+=(openblas)
	else
		echo "==> libopenblas is not installed: measuring the default build only (--openblas installs it)."
	fi
	;;
esac
if [[ " ${builds[*]} " == *" openblas "* ]] && ! grep -q sgemmExternal kernels/gemm.go; then
	echo "==> Note: kernels/gemm.go does not call sgemmExternal yet, so the openblas build runs the same"
	echo "    pure-Go kernels as the default build."
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Compile each build's test binary once, so that compiling is not part of any measurement.
for build in "${builds[@]}"; do
	tags=()
	[[ $build == openblas ]] && tags=(-tags openblas)
	echo "==> Compiling the nets benchmarks ($build build)"
	go test -c "${tags[@]}" -o "$tmp/nets-$build.test" ./nets
done
go test -c -o "$tmp/kernels.test" ./kernels

# The machine's peak, all cores: a register-only FMA loop (kernels.MeasurePeak). Each step's counted
# work (nets.Model.StepFLOPs, the same for both sides) over its time is printed as a fraction of it.
echo "==> Measuring this machine's peak FLOP/s (go test ./kernels -bench Peak)"
peak=$(cd kernels && "$tmp/kernels.test" -test.run XXX -test.bench '^BenchmarkPeak$' -test.benchtime 1x 2>&1 |
	awk '$1 ~ /^BenchmarkPeak/ { for (i = 2; i < NF; i++) if ($(i+1) == "GFLOP/s-all") print $i }')
[[ -n $peak ]] || { echo "run.sh: the peak benchmark printed no GFLOP/s-all" >&2; exit 1; }

echo "==> $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews wall-clock rates)"
echo "==> $(go version | cut -d' ' -f3), GOMAXPROCS=${GOMAXPROCS:-$(nproc)}; PyTorch $("$py" -c 'import torch; print(torch.__version__)') ($py), $threads threads, OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}"
echo "==> $iters timed steps per model and build, after warm-up ($warmup step(s) for PyTorch, 1 for ours)"

# ours runs BenchmarkTrainStep/<model> and prints "<rate> <cpu ms per step>". The benchmark does one
# untimed warm-up step, then reports (timed steps x batch) / elapsed, i.e. the mean rate.
ours() {
	local build=$1 model=$2 out
	if ! out=$(cd nets && "$tmp/nets-$build.test" -test.run XXX -test.bench "^BenchmarkTrainStep\$/^$model\$" -test.benchtime "${iters}x" 2>&1); then
		echo "run.sh: our benchmark failed ($build build, $model):" >&2
		echo "$out" >&2
		return 1
	fi
	echo "$out" | awk -v m="$model" '
		$1 ~ "^BenchmarkTrainStep/" m "(-[0-9]+)?$" {
			for (i = 2; i < NF; i++) {
				if ($(i+1) == "samples/s" || $(i+1) == "tokens/s") rate = $i
				if ($(i+1) == "cpu-ms/op") cpu = $i
				if ($(i+1) == "GFLOP/s") flops = $i
			}
		}
		END { if (rate == "" || flops == "") exit 1; print rate, cpu, flops }' || {
		echo "run.sh: no rate in the benchmark output ($build build, $model):" >&2
		echo "$out" >&2
		return 1
	}
}

# The table: rates as "<number> <unit>", CPU time per step over all threads of the process.
row() { printf '| %-8s | %-8s | %15s | %15s | %12s | %9s | %9s | %12s | %13s |\n' "$@"; }
table=$(
	row model build ours PyTorch ours/PyTorch "CPU ours" "CPU torch" "peak, ours" "peak, torch"
	row -------- -------- --------------- --------------- ------------ --------- --------- ------------ -------------
)
for model in ${models//,/ }; do
	unit=img/s
	[[ $model == lstm ]] && unit=tok/s
	echo "==> $model: PyTorch"
	# PyTorch's BLAS (OpenBLAS on Debian) has its own thread pool besides OpenMP's: give it the
	# same count. OpenMP threads that spin while they wait (libgomp's default) slowed PyTorch's
	# steps 5-20x, at several times the CPU time, on the shared 2-core development machine;
	# sleeping waits were never slower there, so they are the default unless you choose.
	res=$(OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} \
		"$py" "$here/torch_step.py" "$model" --threads "$threads" --warmup "$warmup" --iters "$iters")
	read -r t_rate t_cpu <<<"$res"
	for build in "${builds[@]}"; do
		echo "==> $model: ours ($build build)"
		res=$(ours "$build" "$model")
		read -r o_rate o_cpu o_flops <<<"$res"
		ratio=$(awk -v a="$o_rate" -v b="$t_rate" 'BEGIN { printf "%.2f", a / b }')
		# Both sides do the same work per sample, so PyTorch's rate of work is ours scaled by the rates.
		o_peak=$(awk -v f="$o_flops" -v p="$peak" 'BEGIN { printf "%.0f%%", 100 * f / p }')
		t_peak=$(awk -v f="$o_flops" -v a="$o_rate" -v b="$t_rate" -v p="$peak" 'BEGIN { printf "%.0f%%", 100 * f * b / a / p }')
		table+=$'\n'$(row "$model" "$build" "$(printf '%.1f %s' "$o_rate" "$unit")" "$(printf '%.1f %s' "$t_rate" "$unit")" \
			"$ratio" "$(printf '%.0f ms' "$o_cpu")" "$(printf '%.0f ms' "$t_cpu")" "$o_peak" "$t_peak")
	done
done

echo
echo "$table"
echo
echo "ours: go test -bench TrainStep/<model>, mean rate over $iters step(s) after 1 warm-up step;"
echo "PyTorch: median over $iters step(s) after $warmup warm-up step(s), $threads thread(s). CPU: CPU time"
echo "per step of all the process's threads. ours/PyTorch above 1 means ours is faster."
echo "peak: the step's counted work (nets.Model.StepFLOPs: three times the forward pass's, as direct"
echo "products) per second, over this machine's peak FLOP/s on all cores: $peak GFLOP/s."
