#!/usr/bin/env bash
# Times our allreduce, allgather and alltoallv between separate processes of this machine against Open
# MPI's, in one run, alternating the two, and prints both medians and their ratio per size and
# rank count. See README.md in this folder.
set -euo pipefail

usage() {
	cat <<'EOF'
Usage: tools/bench-collectives/run.sh [options]

  --quick           smallest run: 1 repeat, 3 batches, sizes 1K,64K,1M,100M
  --repeats N       launches of each program per rank count, alternated (default 3)
  --batches N       timed batches per size inside a launch (default 5)
  --ranks LIST      comma-separated rank counts (default 2,4)
  --sizes LIST      comma-separated sizes, K and M suffixes (default 1K,4K,16K,64K,256K,1M,4M,16M,100M,256M)
  --ops LIST        any of allreduce,allgather,alltoallv (default all three)
  --tcp             also measure ours over TCP (SSF_SHM=off), the transport before shared memory
  --mpi-backend     also measure our MPI backend (go build -tags mpi) under mpirun
  --busy            keep a lowest-priority (nice 19) busy loop on every core while measuring,
                    as other work on a shared machine would
  --out FILE        also keep every launch's results (lines: program op bytes ranks ms) in FILE
  --table FILE      measure nothing: print the table of the results --out kept in FILE
  -h, --help        this text

May install, with apt-get (as root, or through sudo), openmpi-bin and libopenmpi-dev when mpirun
or mpicc is missing. It says so before doing it.
EOF
}

repeats=3
batches=5
ranks=2,4
sizes=1K,4K,16K,64K,256K,1M,4M,16M,100M,256M
ops=allreduce,allgather,alltoallv
tcp=no
mpi_backend=no
busy=no
table_from=
out=

while (($#)); do
	case $1 in
	--quick) repeats=1 batches=3 sizes=1K,64K,1M,100M ;;
	--repeats) repeats=${2:?--repeats needs a number}; shift ;;
	--batches) batches=${2:?--batches needs a number}; shift ;;
	--ranks) ranks=${2:?--ranks needs a list}; shift ;;
	--sizes) sizes=${2:?--sizes needs a list}; shift ;;
	--ops) ops=${2:?--ops needs a list}; shift ;;
	--tcp) tcp=yes ;;
	--mpi-backend) mpi_backend=yes ;;
	--busy) busy=yes ;;
	--table) table_from=${2:?--table needs a file name}; shift ;;
	--out) out=${2:?--out needs a file name}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --repeats must be a positive integer, got $repeats" >&2; exit 2; }
[[ $batches =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --batches must be a positive integer, got $batches" >&2; exit 2; }
for p in ${ranks//,/ }; do
	[[ $p =~ ^[1-9][0-9]*$ && $p -ge 2 ]] || { echo "run.sh: rank counts must be integers >= 2, got $p" >&2; exit 2; }
done
for s in ${sizes//,/ }; do
	[[ $s =~ ^[1-9][0-9]*[KM]?$ ]] || { echo "run.sh: size $s: want a number with an optional K or M suffix" >&2; exit 2; }
done
for o in ${ops//,/ }; do
	case $o in allreduce | allgather | alltoallv) ;; *) echo "run.sh: unknown operation $o (allreduce, allgather, alltoallv)" >&2; exit 2 ;; esac
done

[[ -z $out ]] || out=$(realpath -m -- "$out")

# print_table FILE prints the table of the launches' results in FILE (lines: program op bytes
# ranks ms): medians over the repeats of each launch's median, and the fastest launches.
print_table() {
	local extra=()
	grep -q '^ours-tcp ' "$1" && extra+=(ours-tcp)
	grep -q '^ours-mpi ' "$1" && extra+=(ours-mpi)
	awk -v extra="${extra[*]}" '
function least(list,   a, n, i, m) {
	n = split(list, a, " ")
	m = a[1]
	for (i = 2; i <= n; i++) if (a[i] + 0 < m + 0) m = a[i]
	return m
}
function median(list,   a, n, i, j, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function human(b) {
	if (b >= 1048576) return (b / 1048576) "MB"
	if (b >= 1024) return (b / 1024) "KB"
	return b "B"
}
{
	key = $2 SUBSEP $3 SUBSEP $4
	if (!(key in seen)) { seen[key] = 1; order[++nkeys] = key }
	times[$1, key] = times[$1, key] " " $5
}
END {
	ne = split(extra, ex, " ")
	printf "\n%-10s %6s %5s %12s %12s %10s %10s", "op", "size", "ranks", "ours ms", "OpenMPI ms", "ours/OMPI", "best/best"
	for (i = 1; i <= ne; i++) printf " %12s", ex[i] " ms"
	printf "\n"
	for (k = 1; k <= nkeys; k++) {
		key = order[k]
		split(key, f, SUBSEP)
		o = median(times["ours", key]); m = median(times["openmpi", key])
		ob = least(times["ours", key]); mb = least(times["openmpi", key])
		printf "%-10s %6s %5s %12.4f %12.4f %10.2f %10.2f", f[1], human(f[2]), f[3], o, m, (m > 0 ? o / m : 0), (mb > 0 ? ob / mb : 0)
		for (i = 1; i <= ne; i++) printf " %12.4f", median(times[ex[i], key])
		printf "\n"
	}
}' <(sort -s -k2,2 -k4,4n -k3,3n "$1")
	echo
	echo "ours/OMPI is our time over Open MPI's: below 1 means ours is faster. best/best is the same"
	echo "ratio of each side's fastest launch: what each can do when nothing else slows the machine."
}

if [[ -n $table_from ]]; then
	[[ -r $table_from ]] || { echo "run.sh: cannot read $table_from" >&2; exit 1; }
	grep -q '^openmpi ' "$table_from" || { echo "run.sh: $table_from holds no Open MPI results (want the lines --out keeps)" >&2; exit 1; }
	print_table "$table_from"
	exit 0
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
[[ -f go.mod && -d dist ]] || { echo "run.sh: $root does not look like the ssfusion repository" >&2; exit 1; }
command -v go >/dev/null || { echo "run.sh: the go command is not on the PATH" >&2; exit 1; }

# shellcheck source=../lib.sh
source "$here/../lib.sh"
if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
	apt_install "Open MPI is the yardstick (mpirun, and mpicc for its side of the benchmark)" openmpi-bin libopenmpi-dev
fi

work=$(mktemp -d)
hogs=()
trap 'rm -rf "$work"; ((${#hogs[@]} == 0)) || kill "${hogs[@]}" 2>/dev/null' EXIT
echo "==> Building (go build, mpicc) in $work"
go build -o "$work/ours" ./tools/bench-collectives
mpicc -O2 -o "$work/ompi" "$here/openmpi/ompi_bench.c"
if [[ $mpi_backend == yes ]]; then
	CGO_ENABLED=1 go build -tags mpi -o "$work/ours-mpi" ./tools/bench-collectives
fi

# Open MPI refuses to run as root without this flag, and more ranks than cores without
# --oversubscribe. MALLOC_MMAP_MAX_=0 and MALLOC_TRIM_THRESHOLD_ keep glibc from handing
# the scratch buffers of MPI_Allreduce back to the kernel after every call (through munmap,
# or by trimming the heap): otherwise page faults dominate its large allreduces on virtual
# machines.
mpirun_flags=(--oversubscribe -x MALLOC_MMAP_MAX_=0 -x MALLOC_TRIM_THRESHOLD_=4294967295)
((EUID != 0)) || mpirun_flags+=(--allow-run-as-root)
if [[ -n ${OMPI_MCA_btl_vader_single_copy_mechanism:-} ]]; then
	mpirun_flags+=(-x OMPI_MCA_btl_vader_single_copy_mechanism)
fi

args=(-sizes "$sizes" -ops "$ops" -batches "$batches")
results=$work/results
: >"$results"

# measure NAME CMD... runs one launch and appends "NAME op bytes ranks ms" lines.
measure() {
	local name=$1 out
	shift
	if ! out=$("$@" 2>&1); then
		echo "run.sh: $name failed:" >&2
		echo "$out" >&2
		exit 1
	fi
	grep -q "result " <<<"$out" || { echo "run.sh: $name printed no results:" >&2; echo "$out" >&2; exit 1; }
	sed -n 's/^\(\[rank 0\] \)\{0,1\}result /'"$name"' /p' <<<"$out" >>"$results"
}

if [[ $busy == yes ]]; then
	for ((c = 0; c < $(nproc); c++)); do
		nice -n 19 bash -c 'while :; do :; done' &
		hogs+=($!)
	done
	echo "==> ${#hogs[@]} busy loops at nice 19 run while measuring"
fi
echo "==> $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before"
for ((i = 1; i <= repeats; i++)); do
	for p in ${ranks//,/ }; do
		echo "==> repeat $i of $repeats, $p ranks"
		measure ours "$work/ours" -np "$p" "${args[@]}"
		measure openmpi mpirun "${mpirun_flags[@]}" -np "$p" "$work/ompi" "${args[@]}"
		if [[ $tcp == yes ]]; then
			measure ours-tcp env SSF_SHM=off "$work/ours" -np "$p" "${args[@]}"
		fi
		if [[ $mpi_backend == yes ]]; then
			measure ours-mpi mpirun "${mpirun_flags[@]}" -np "$p" "$work/ours-mpi" -backend mpi "${args[@]}"
		fi
	done
done
echo "==> load average $(cut -d' ' -f1-3 /proc/loadavg) after"
[[ -z $out ]] || cp "$results" "$out"

print_table "$results"
