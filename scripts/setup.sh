#!/usr/bin/env bash
# Installs what building and testing need on Debian 12 / Ubuntu (idempotent: only missing packages are installed).
# The CUDA toolkit is not installed here: with nvcc on PATH (or in /usr/local/cuda) the CUDA backend is built too.
set -euo pipefail

packages=(cmake ninja-build g++ ccache pkg-config nlohmann-json3-dev libcli11-dev libgtest-dev libcpp-httplib-dev
          clang libclang-rt-dev python3 python3-venv)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# nvcc is often installed outside PATH.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: found /usr/local/cuda/bin/nvcc (add /usr/local/cuda/bin to PATH to use it directly)" >&2
fi
