#!/usr/bin/env bash
# Draws the committed maps of where SSFusion wins (results/maps/*): each a simulate --vary run
# over two hardware constants, every other constant at the SSFusion paper's testbed (8 workers,
# 10 Gbit/s, 37 us per message, the GPU selection model). A map interrupted goes on from the
# points it kept when run again. Usage: tools/maps/run.sh [NAME...] (default: every map).
set -euo pipefail
cd "$(dirname "$0")/../.."

# The pipelines SSFusion measured itself against, and dense; 16 steps, the last 4 averaged,
# by which Cupcake's search is within a few per cent of the partition it settles on. Besides
# the fastest of all others, each report compares SSFusion with the pipelines of claim (c),
# per-tensor and multi-tensor, and with those of claim (f), the systems its paper measured
# itself against (a comparison is drawn from the kept points: adding one redraws a map).
common=(--validate=false --selection gpu --workers 8 --bandwidth 10Gbit --latency 37us
	--pipelines dense,pertensor,multitensor,ssfusion,omgs,oktopk,spardl,cupcake,powersgd
	--compare "per-tensor and multi-tensor=pertensor,multitensor"
	--compare "OMGS-SGD, Ok-Topk, SparDL and Cupcake=omgs,oktopk,spardl,cupcake"
	--steps 16 --warmup 12)

declare -A maps=(
	[resnet50-call-bandwidth]="--profile resnet50 --vary select-call=1us..200us/5 --vary bandwidth=1Gbit..400Gbit/6"
	[resnet50-element-call]="--profile resnet50 --vary select-call=100ns..200us/5 --vary select-element=0.01ns..3ns/5"
	[resnet50-latency-bandwidth]="--profile resnet50 --vary latency=1us..1ms/5 --vary bandwidth=1Gbit..400Gbit/6"
	[resnet50-workers-bandwidth]="--profile resnet50 --vary workers=8..256/6 --vary bandwidth=1Gbit..400Gbit/6"
	# A point of BERT-base or VGG-16 (110 and 138 million parameters) takes minutes: coarser
	# grids and fewer steps, the last 4 averaged (Cupcake's search on BERT-base is then a few
	# per cent from where it settles; on VGG-16 it settles within 4 steps).
	[bert-base-call-bandwidth]="--profile bert-base --vary select-call=1us..200us/4 --vary bandwidth=1Gbit..400Gbit/5 --steps 12 --warmup 8"
	[vgg16-call-bandwidth]="--profile vgg16 --vary select-call=1us..200us/3 --vary bandwidth=1Gbit..400Gbit/4 --steps 10 --warmup 6"
)
order=(resnet50-call-bandwidth resnet50-element-call resnet50-latency-bandwidth resnet50-workers-bandwidth
	bert-base-call-bandwidth vgg16-call-bandwidth)

names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${order[@]}")
for name in "${names[@]}"; do
	[ -n "${maps[$name]:-}" ] || { echo "tools/maps/run.sh: no map called $name (maps: ${order[*]})" >&2; exit 2; }
done
# SSF_BIN names a binary to use (tools/reproduce passes the one it built at its revision).
bin=${SSF_BIN:-}
if [ -z "$bin" ]; then
	bin=/tmp/ssf-maps
	go build -o "$bin" .
fi
for name in "${names[@]}"; do
	echo "== $name: $(date -u +%H:%M:%S)"
	# shellcheck disable=SC2086 # the map's flags are words
	"$bin" simulate "${common[@]}" ${maps[$name]} --out "results/maps/$name"
done
