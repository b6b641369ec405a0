"""Display helpers every result type shares: a pandas DataFrame of rows (`to_pandas()`), and the HTML of
what a rich renderer prints (Jupyter's `_repr_html_`). Imports pandas and rich only when called."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["frame", "html_of"]


def frame(rows: Iterable[Mapping[str, Any]]) -> Any:
    """A pandas DataFrame of `rows` (one mapping per row)."""
    try:
        import pandas as pd  # optional: only to_pandas() needs it
    except ImportError:
        raise ModuleNotFoundError("to_pandas() needs pandas: pip install 'flopwise[pandas]' (or pandas)") from None
    return pd.DataFrame([dict(r) for r in rows])


def html_of(render: Callable[[Any], None], width: int = 140) -> str:
    """HTML of what `render(console)` prints (the CLI's rich tables), for Jupyter's `_repr_html_`."""
    from rich.console import Console  # display only

    console = Console(record=True, file=io.StringIO(), width=width, force_terminal=True, color_system="truecolor")
    render(console)
    return console.export_html(inline_styles=True, code_format='<pre style="font-size:12px">{code}</pre>')
