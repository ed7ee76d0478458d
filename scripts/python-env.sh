#!/usr/bin/env bash
# A virtual environment for the test-side Python (Hugging Face tokenizers for live parity checks), in
# build/pyenv. Idempotent. Prints nothing when already set up.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/pyenv
want="tokenizers==0.23.2 jinja2==3.1.6"
if [ -f "$venv/.ready" ] && [ "$(cat "$venv/.ready")" = "$want" ]; then exit 0; fi
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check $want
echo "$want" > "$venv/.ready"
