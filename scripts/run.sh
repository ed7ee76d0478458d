#!/usr/bin/env bash
# The main command (README): installs what the build needs, builds the release preset's qwen3 (with the CUDA
# backend when nvcc is found), then generates with `qwen3 run`: from the checkpoint given with --model DIR, else
# from the small random checkpoint shipped in tests/data (its output is noise). On the GPU when there is one.
#
#   scripts/run.sh [--model DIR] [any `qwen3 run` flags]
#
# Every flag is passed to `qwen3 run`; the defaults added when absent are --prompt "Explain rotary position
# embeddings" and --max-tokens 128 (and --no-think for the shipped checkpoint). A second run only checks and rebuilds what changed. stdout carries only the
# generated text; setup and build messages go to stderr.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/env.sh"

has_model=0 has_prompt=0 has_max_tokens=0 has_tokenizer=0 templated=1
for arg in "$@"; do
  case "$arg" in
    --model | --model=* | -m) has_model=1 ;;
    --prompt | --prompt=* | -p) has_prompt=1 ;;
    --prompt-ids | --prompt-ids=*) has_prompt=1 templated=0 ;;
    --raw | --no-think | --no-think=*) templated=0 ;;
    --max-tokens | --max-tokens=* | -n) has_max_tokens=1 ;;
    --tokenizer | --tokenizer=*) has_tokenizer=1 ;;
  esac
done

"$root/scripts/setup.sh"
# Configure once; afterwards ninja re-runs CMake by itself when a CMakeLists.txt changes.
if [ ! -f "$root/build/release/build.ninja" ]; then
  (cd "$root" && cmake --preset release) >&2
fi
(cd "$root" && cmake --build --preset release --target qwen3) >&2

args=()
if ((!has_model)); then
  echo "run.sh: no --model DIR given: using the shipped tests/data/text_real_vocab checkpoint, whose weights" \
       "are random: the text below is noise (give --model DIR for a real Qwen3 checkpoint)" >&2
  args+=(--model "$root/tests/data/text_real_vocab")
  ((has_tokenizer)) || args+=(--tokenizer "$root/tests/data/tokenizer/tokenizer.json")
  # Thinking on, this random model writes nothing but newlines; without it the noise is at least visible.
  ((templated)) && args+=(--no-think)
fi
((has_prompt)) || args+=(--prompt "Explain rotary position embeddings")
((has_max_tokens)) || args+=(--max-tokens 128)
exec "$root/build/release/bin/qwen3" run "${args[@]}" "$@"
