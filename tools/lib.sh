#!/usr/bin/env bash
# Shared by the benchmark scripts under tools/: root, apt-get and finding (or installing)
# PyTorch. Sourced, not run.

# as_root runs a command as root: directly, or through sudo when we are not root.
as_root() {
	if ((EUID == 0)); then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		echo "${0##*/}: need root to run: $*  (run it yourself, then rerun this script)" >&2
		exit 1
	fi
}

# apt_update refreshes apt's package lists, once per run.
apt_updated=
apt_update() {
	[[ -n $apt_updated ]] || as_root apt-get update
	apt_updated=1
}

# apt_install installs Debian packages, without their recommended ones, after saying what and why.
apt_install() {
	local why=$1
	shift
	command -v apt-get >/dev/null || { echo "${0##*/}: $why, but there is no apt-get here: install $* yourself" >&2; exit 1; }
	echo "==> Installing $* with apt-get: $why."
	apt_update
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
}

# torch_python prints the first Python that can import torch: $PYTHON when set, else python3 on
# the PATH, else Debian's /usr/bin/python3 (a pyenv or venv python3 on the PATH does not see
# Debian's python3-torch).
torch_python() {
	local p
	for p in ${PYTHON:-python3 /usr/bin/python3}; do
		if command -v "$p" >/dev/null && "$p" -c 'import torch' 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# ensure_torch sets py to a Python that imports torch, installing Debian's CPU build
# (python3-torch) when no python3 has one.
ensure_torch() {
	if py=$(torch_python); then
		return 0
	fi
	no_torch() {
		echo "${0##*/}: PyTorch is not installed (python3 -c 'import torch' fails) and $1." >&2
		echo "Debian has python3-torch from Debian 12 on; elsewhere install PyTorch for python3 another" >&2
		echo "way (e.g. pip install torch) and rerun, with PYTHON=/path/to/that/python if needed." >&2
		exit 1
	}
	[[ -z ${PYTHON:-} ]] || no_torch "PYTHON=$PYTHON is set (apt-get would install for /usr/bin/python3)"
	command -v apt-get >/dev/null || no_torch "there is no apt-get here"
	echo "==> PyTorch is not installed: looking for Debian's python3-torch (apt-get update)."
	apt_update >/dev/null
	# Read apt-cache's answer whole: grep -q stopping early would fail the pipe under pipefail.
	policy=$(apt-cache policy python3-torch 2>/dev/null || true)
	[[ $policy == *"Candidate: "[0-9]* ]] || no_torch "apt has no python3-torch package"
	# Of python3-torch's recommended packages only a fast BLAS matters here (the rest are
	# libtorch-dev and build tools): without libopenblas0 PyTorch's BLAS would be the slow
	# reference libblas3, and the comparison would flatter us.
	apt_install "PyTorch is needed for the comparison (Debian's CPU build python3-torch, with OpenBLAS as its BLAS; about 150 MB to download on Debian 12, several hundred MB on disk)" \
		python3-torch libopenblas0
	py=$(torch_python) || { echo "${0##*/}: python3-torch is installed, but neither python3 nor /usr/bin/python3 can import torch" >&2; exit 1; }
}
