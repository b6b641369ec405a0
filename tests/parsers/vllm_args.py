"""Parse `vllm serve` argument lists with vLLM's own parser (run by vLLM's Python, .venv-vllm).

stdin: a JSON list of argument lists (what follows `vllm serve`). stdout: a JSON list of {"ok": bool, "error": str}
per list. Beyond argparse (names, types, choices), the values argparse leaves free are checked against vLLM's
own tables: --quantization against QUANTIZATION_METHODS, the speculative config against SpeculativeConfig's
method literal, and AsyncEngineArgs.from_cli_args builds the engine arguments."""

import contextlib
import io
import json
import sys
from typing import get_args

from vllm.config.speculative import SpeculativeMethod
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
from vllm.utils.argparse_utils import FlexibleArgumentParser


def _methods(tp) -> set[str]:
    out = set()
    for a in get_args(tp):
        out |= _methods(a) if get_args(a) else {a}
    return out


def check(argv: list[str]) -> dict[str, object]:
    parser = make_arg_parser(FlexibleArgumentParser())
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit:
        return {"ok": False, "error": err.getvalue().strip()[-600:]}
    if args.quantization is not None and args.quantization not in QUANTIZATION_METHODS:
        return {"ok": False, "error": f"--quantization {args.quantization} is not a vLLM method"}
    spec = args.speculative_config
    if spec is not None and spec.get("method") not in _methods(SpeculativeMethod):
        return {"ok": False, "error": f"speculative method {spec.get('method')} is not one of vLLM's"}
    args.model = args.model_tag or args.model
    AsyncEngineArgs.from_cli_args(args)
    return {"ok": True, "error": ""}


if __name__ == "__main__":
    print(json.dumps([check(a) for a in json.load(sys.stdin)]))
