# Sourced by the scripts: puts nvcc on PATH when the CUDA toolkit is installed in the usual place.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
