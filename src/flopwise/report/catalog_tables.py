"""Tables of the model and hardware catalogs."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from flopwise.errors import SpecError, UnknownHardwareError, UnknownModelError, suggest
from flopwise.specs.engine import engine_base_version, engine_families, engine_releases, get_engine, parse_engine_text
from flopwise.specs.hardware import HardwareSpec
from flopwise.specs.model_catalog import get_model, model_catalog


def model_rows(match: str | None = None) -> list[dict[str, Any]]:
    """One row per catalog model; `match`: only those with it in an id, alias or other repo id (any case)."""
    rows = []
    entries = [e for e in model_catalog() if match is None or any(match.lower() in n.lower() for n in e.names)]
    if match is not None and not entries:
        names = [n for e in model_catalog() for n in e.names]
        raise UnknownModelError(f"no catalog model matches '{match}'.{suggest(match, names)} Run `flopwise models` "
                                "for the whole catalog.")
    for entry in entries:
        m = get_model(entry.id)
        attn = "MLA" if m.mla else f"{m.num_heads}/{m.num_kv_heads}"
        rows.append({
            "id": entry.id, "aliases": list(entry.aliases), "also": list(entry.also), "family": m.family,
            "params_b": round(m.total_params / 1e9, 3), "active_params_b": round(m.active_params / 1e9, 3),
            "published_params_b": entry.published_params_b, "layers": m.num_layers, "hidden": m.hidden_size,
            "heads_q_kv": attn, "head_dim": m.head_dim, "vocab": m.vocab_size,
            "moe": f"{m.moe.num_experts}x top-{m.moe.experts_per_token}" if m.moe else None,
            "sliding_window_layers": sum(w is not None for w in m.layer_windows),
            "attention_kinds": list(m.attention_kinds),
            "checkpoint_weights": m.checkpoint_weights,
            "kv_bytes_per_token_bf16": m.kv_elements_per_token * 2, "source": entry.source,
        })
    return rows


def model_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="flopwise model catalog", show_lines=False)
    for col in ("id", "alias", "params", "active", "layers", "hidden", "heads q/kv", "KV B/token (bf16)", "MoE"):
        t.add_column(col, justify="right" if col not in ("id", "alias", "MoE") else "left")
    for r in rows:
        t.add_row(r["id"], ", ".join(r["aliases"]), f"{r['params_b']:.2f}B", f"{r['active_params_b']:.2f}B",
                  str(r["layers"]), str(r["hidden"]), r["heads_q_kv"], f"{r['kv_bytes_per_token_bf16']:,}",
                  r["moe"] or "")
    return t


def hardware_rows(catalog: dict[str, HardwareSpec], match: str | None = None) -> list[dict[str, Any]]:
    """One row per part; `match`: the part with that id, else those with it in their id or name (any case)."""
    if match is not None:
        key = match.lower()
        found = ({i: hw for i, hw in catalog.items() if i.lower() == key}
                 or {i: hw for i, hw in catalog.items() if key in i.lower() or key in hw.name.lower()})
        if not found:
            raise UnknownHardwareError(f"no catalog GPU matches '{match}'.{suggest(match, catalog)} Run `flopwise "
                                       "hardware` for the whole catalog.")
        catalog = found
    return [{
        "id": hw.id, "name": hw.name, "vendor": hw.vendor, "kind": hw.kind, "memory_gib": hw.memory_gib,
        "memory_bandwidth_gbs": hw.memory_bandwidth_gbs, "memory_kind": hw.memory_kind,
        "peak_tflops": dict(hw.peak_tflops), "unthrottled_tflops": dict(hw.unthrottled_tflops),
        "interconnect": hw.interconnect, "interconnect_gbs": hw.interconnect_gbs, "gpus_per_node": hw.gpus_per_node,
        "gpus_per_host": hw.gpus_per_host, "network": hw.network, "network_gbs": hw.network_gbs, "tdp_w": hw.tdp_w,
        "price_per_hour_usd": hw.price_per_hour_usd, "sources": dict(hw.sources),
    } for hw in catalog.values()]


def hardware_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="flopwise hardware catalog (dense peaks)")
    for col in ("id", "name", "GiB", "memory", "GB/s", "bf16 TF", "fp8 TF", "int8 TOPS", "fp4 TF", "link GB/s", "$/h",
                "source"):
        t.add_column(col, justify="left" if col in ("id", "name", "memory", "source") else "right",
                     overflow="fold", max_width=40 if col == "source" else None)

    def f(x: float | None) -> str:
        return "-" if not x else f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"

    for r in rows:
        p = r["peak_tflops"]
        t.add_row(r["id"], r["name"], f(r["memory_gib"]), r["memory_kind"] or "-", f(r["memory_bandwidth_gbs"]),
                  f(p.get("bf16") or p.get("fp16")),
                  f(p.get("fp8")), f(p.get("int8")), f(p.get("fp4")), f(r["interconnect_gbs"]),
                  f"{r['price_per_hour_usd']:.2f}" if r["price_per_hour_usd"] else "-",
                  r["sources"].get("compute", ""))
    return t


def engine_rows(name: str | None = None) -> list[dict[str, Any]]:
    """One row per engine release: what changes at that version (see specs/engine.py); `name`: one family
    ("vllm"), or a family at a version ("vllm@0.11": the releases up to the one that profile is built from)."""
    rows = []
    if name is not None:
        parse_engine_text(name, what="engines")  # 'vllm@': named as this command's argument, not --engine
    picked = None if name is None else get_engine(name, frontend="none")  # an unknown name: its one-line error
    upto = picked.version if picked is not None and name is not None and "@" in name else None
    for fam in engine_families() if picked is None else (picked.family,):
        for since in engine_releases(fam, upto):
            at = since if since != "0" else engine_base_version(fam)  # the base: the family's first release
            e = get_engine(f"{fam}@{at}", frontend="none")
            fe = get_engine(f"{fam}@{at}").frontend if _has_frontend(fam, at) else None
            rows.append({
                "engine": fam, "since": since if since != "0" else "(base)", "scheduler": e.scheduler,
                "memory_policy": e.memory_policy, "memory_fraction": e.memory_fraction,
                "chunked_prefill": e.enable_chunked_prefill, "prefix_caching": e.enable_prefix_caching,
                "async_scheduling": e.host.async_scheduling, "host_step_ms": e.host.step_s * 1e3,
                "host_per_seq_us": e.host.per_seq_s * 1e6,
                "frontend_request_ms": None if fe is None else fe.request_s * 1e3,
                "frontend_token_us": None if fe is None else fe.output_token_s * 1e6,
                "source": dict(e.sources).get(since if since != "0" else "base", ""),
            })
    return rows


def engine_note(name: str | None) -> str:
    """What the version asked is priced as, where it is past every release the catalog knows or a pre-release
    (`EngineProfile.version_note`); '' otherwise."""
    return "" if name is None or "@" not in name else get_engine(name, frontend="none").version_note


def _has_frontend(family: str, since: str) -> bool:
    try:
        get_engine(f"{family}@{since}")
    except SpecError:
        return False
    return True


def engine_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="flopwise engine catalog (each release states what changed)")
    for c in ("engine", "since", "scheduler", "memory", "chunked / prefix", "async", "host step ms + us/seq",
              "API server ms/req, us/token", "source"):
        t.add_column(c, overflow="fold")
    for r in rows:
        fe = ("-" if r["frontend_request_ms"] is None
              else f"{r['frontend_request_ms']:.2f}, {r['frontend_token_us']:.0f}")
        t.add_row(r["engine"], r["since"], r["scheduler"], f"{r['memory_policy']} {r['memory_fraction']:g}",
                  f"{'on' if r['chunked_prefill'] else 'off'} / {'on' if r['prefix_caching'] else 'off'}",
                  "yes" if r["async_scheduling"] else "no", f"{r['host_step_ms']:.2f} + {r['host_per_seq_us']:.0f}",
                  fe, r["source"])
    return t
