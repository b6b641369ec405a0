"""One argparse parser's option names, switches (options that take no value) and choices, as the launch tests
read them (tests/data/*_options.json): shared by the engine parser scripts here, each run by its engine's Python."""

import argparse


def option_table(parser: argparse.ArgumentParser) -> dict[str, object]:
    options, switches, choices = [], [], {}
    for a in parser._actions:
        for s in a.option_strings:
            options.append(s)
            if a.nargs == 0:
                switches.append(s)
            if a.choices is not None:
                choices[s] = sorted(map(str, a.choices))
    return {"options": sorted(options), "switches": sorted(switches), "choices": choices}
