#!/usr/bin/env bash
# Times our allreduce over TCP between two network namespaces joined by a veth link shaped
# to a set rate (tc tbf), and prints it against the link's bound: a ring allreduce of S bytes
# among P ranks sends 2(P-1)/P·S bytes from every rank, so it cannot take less than that
# over the link's rate. See README.md in this folder.
set -euo pipefail

usage() {
	cat <<'EOF'
Usage: tools/bench-collectives/link.sh [options]

  --rates LIST      comma-separated link rates, tc units (default 100mbit,300mbit,1gbit)
  --size SIZE       allreduce size, K and M suffixes (default 100M)
  --batches N       timed batches per rate; the median is reported (default 3)
  -h, --help        this text

Needs root (ip netns, tc; through sudo when not root) and the iproute2 package. Two ranks,
one in each namespace, talk over TCP (SSF_SHM=off: the namespaces share /dev/shm, where the
ranks would otherwise meet). Everything it creates is removed when it ends.
EOF
}

rates=100mbit,300mbit,1gbit
size=100M
batches=3
while (($#)); do
	case $1 in
	--rates) rates=${2:?--rates needs a list}; shift ;;
	--size) size=${2:?--size needs a size}; shift ;;
	--batches) batches=${2:?--batches needs a number}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "link.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
[[ $batches =~ ^[1-9][0-9]*$ ]] || { echo "link.sh: --batches must be a positive integer, got $batches" >&2; exit 2; }
[[ $size =~ ^[1-9][0-9]*[KM]?$ ]] || { echo "link.sh: --size $size: want a number with an optional K or M suffix" >&2; exit 2; }
for r in ${rates//,/ }; do
	[[ $r =~ ^[1-9][0-9]*(kbit|mbit|gbit)$ ]] || { echo "link.sh: rate $r: want a number and kbit, mbit or gbit" >&2; exit 2; }
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
# shellcheck source=../lib.sh
source "$here/../lib.sh"
command -v ip >/dev/null && command -v tc >/dev/null || apt_install "the link is built with ip and tc" iproute2

work=$(mktemp -d)
id=ssfl$$
ns=("$id-a" "$id-b")
cleanup() {
	for n in "${ns[@]}"; do as_root ip netns del "$n" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

echo "==> Building bench-collectives"
go build -o "$work/ours" ./tools/bench-collectives

as_root ip netns add "${ns[0]}"
as_root ip netns add "${ns[1]}"
as_root ip link add "$id-0" netns "${ns[0]}" type veth peer name "$id-1" netns "${ns[1]}"
for i in 0 1; do
	as_root ip -n "${ns[$i]}" addr add "10.199.0.$((i + 1))/24" dev "$id-$i"
	as_root ip -n "${ns[$i]}" link set "$id-$i" up
	as_root ip -n "${ns[$i]}" link set lo up
done

# bytes converts a size with an optional K or M suffix to bytes.
bytes() {
	local s=$1
	case $s in
	*K) echo $((${s%K} << 10)) ;;
	*M) echo $((${s%M} << 20)) ;;
	*) echo "$s" ;;
	esac
}
# bits_per_s converts a tc rate to bits per second.
bits_per_s() {
	local r=$1
	case $r in
	*kbit) echo $((${r%kbit} * 1000)) ;;
	*mbit) echo $((${r%mbit} * 1000000)) ;;
	*gbit) echo $((${r%gbit} * 1000000000)) ;;
	esac
}

n=$(bytes "$size")
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=$((20000 + $$ % 20000))
printf '\n%-8s %10s %14s %14s %10s\n' rate size "ours ms" "bound ms" "of bound"
for rate in ${rates//,/ }; do
	for i in 0 1; do
		# A bucket of 1 ms of the rate (at least 64 KB) and a queue of 50 ms: the rate holds
		# for long transfers without dropping the bursts TCP sends.
		bps=$(bits_per_s "$rate")
		burst=$((bps / 8 / 1000 > 65536 ? bps / 8 / 1000 : 65536))
		as_root ip netns exec "${ns[$i]}" tc qdisc replace dev "$id-$i" root tbf rate "$rate" burst "$burst" latency 50ms
	done
	run() { # run RANK: one rank of the job, in its namespace
		as_root ip netns exec "${ns[$1]}" env RANK="$1" WORLD_SIZE=2 MASTER_ADDR=10.199.0.1 MASTER_PORT="$port" \
			SSF_JOB_TOKEN="$token" SSF_SHM=off "$work/ours" -bind-addr "10.199.0.$(($1 + 1))" \
			-sizes "$size" -ops allreduce -batches "$batches"
	}
	run 1 >"$work/rank1.out" 2>&1 &
	pid=$!
	if ! out=$(run 0 2>&1); then
		echo "link.sh: rank 0 failed at $rate:" >&2
		echo "$out" >&2
		wait "$pid" || true
		cat "$work/rank1.out" >&2
		exit 1
	fi
	wait "$pid" || { echo "link.sh: rank 1 failed at $rate:" >&2; cat "$work/rank1.out" >&2; exit 1; }
	ms=$(awk '$1 == "result" { print $5 }' <<<"$out")
	[[ -n $ms ]] || { echo "link.sh: no result at $rate:" >&2; echo "$out" >&2; exit 1; }
	# 2(P-1)/P·S bytes from each rank at P = 2: S bytes, over the rate.
	bound=$(awk -v n="$n" -v b="$(bits_per_s "$rate")" 'BEGIN { printf "%.1f", n * 8 / b * 1000 }')
	printf '%-8s %10s %14.1f %14s %9.0f%%\n' "$rate" "$size" "$ms" "$bound" "$(awk -v a="$bound" -v m="$ms" 'BEGIN { print 100 * a / m }')"
	port=$((port + 1))
done
echo
echo "of bound: the bound's time over ours (100% is the link's full rate in both directions)."
