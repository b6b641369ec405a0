"""Parse `python -m sglang.launch_server` argument lists with SGLang's own parser (ServerArgs.add_cli_args),
run by the Python of .venv-sglang (scripts/install_sglang_args.sh).

stdin: a JSON list of argument lists; stdout: a JSON list of {"ok": bool, "error": str}. `--dump` prints the
parser's option names, switches and choices instead (tests/data/sglang_options.json is made this way).
SGLang's server_args imports a vision-language helper that imports torchvision at module level; the CPU
environment has no matching torchvision, and argument parsing never calls the helper, so that one module is
replaced by an empty stand-in when torchvision is missing. Nothing else is stubbed."""

import argparse
import contextlib
import importlib.util
import io
import json
import sys
import types

if importlib.util.find_spec("torchvision") is None:
    stub = types.ModuleType("sglang.srt.multimodal.internvl_utils")

    class _Unused:
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Unused()

        def __call__(self, *a, **k):
            return _Unused()

    def _getattr(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Unused()

    stub.__getattr__ = _getattr
    sys.modules[stub.__name__] = stub

import sglang  # noqa: E402
from options import option_table  # noqa: E402  (tests/parsers/options.py, beside this script)
from sglang.srt.server_args import ServerArgs  # noqa: E402


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    return p


def check(argv: list[str]) -> dict[str, object]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser().parse_args(argv)
    except SystemExit:
        return {"ok": False, "error": err.getvalue().strip()[-600:]}
    return {"ok": True, "error": ""}


def dump() -> dict[str, object]:
    return {"version": sglang.__version__, **option_table(parser())}


if __name__ == "__main__":
    if "--dump" in sys.argv:
        print(json.dumps(dump(), indent=1, sort_keys=True))
    else:
        print(json.dumps([check(a) for a in json.load(sys.stdin)]))
