"""Parse `vllm serve` argument lists with vLLM's own parser (run by vLLM's Python, .venv-vllm).

stdin: a JSON list of argument lists (what follows `vllm serve`). stdout: a JSON list of {"ok": bool, "error": str}
per list; `--dump` prints the parser's option names, switches and choices instead (tests/data/vllm_options.json is
made this way, from a release newer than the CPU build: see that file's note). Beyond argparse (names, types,
choices), the values argparse leaves free are checked against vLLM's own tables: --quantization against
QUANTIZATION_METHODS, the speculative config against SpeculativeConfig's method literal, and
AsyncEngineArgs.from_cli_args builds the engine arguments."""

import contextlib
import io
import json
import sys
from typing import get_args

import vllm
from options import option_table  # tests/parsers/options.py, beside this script
from vllm.config.speculative import SpeculativeMethod
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
from vllm.utils.argparse_utils import FlexibleArgumentParser

try:  # v0.33.0 moved it (no re-export at the old path)
    from vllm.entrypoints.common.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser


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


def dump() -> dict[str, object]:
    """The parser's option names, switches (no value) and choices, with the quantization and speculative methods
    `check` reads from vLLM's tables."""
    return {"version": vllm.__version__, **option_table(make_arg_parser(FlexibleArgumentParser())),
            "quantization_methods": sorted(QUANTIZATION_METHODS),
            "speculative_methods": sorted(_methods(SpeculativeMethod))}


if __name__ == "__main__":
    if "--dump" in sys.argv:
        print(json.dumps(dump(), indent=1, sort_keys=True))
    else:
        print(json.dumps([check(a) for a in json.load(sys.stdin)]))
