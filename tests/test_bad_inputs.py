"""Bad input, found by trying what a hostile user would (issue 12): every case is one line on stderr naming the
input, exit code 2, and no traceback, hang, non-finite output or silently substituted value. Grouped by what each
case did before it was fixed; `test_properties.py` generates more of each kind."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import flopwise
from flopwise.api import deployment, explain
from flopwise.cli import run
from flopwise.cost.memory import blocks_per_sequence, max_sequences, memory_plan
from flopwise.errors import DoesNotFitError
from flopwise.profile.discover import discover

CATALOG = Path(__file__).resolve().parents[1] / "src/flopwise/catalog/models"
LLAMA = json.loads((CATALOG / "meta-llama--Llama-3.2-1B.json").read_text())
FAST = ["--num-requests", "5", "--input-len", "64", "--output-len", "4"]


def config(tmp: Path, name: str, **fields) -> str:
    c = copy.deepcopy(LLAMA)
    c.update(fields)
    p = tmp / f"{name}.json"
    p.write_text(json.dumps(c))
    return str(p)


def file(tmp: Path, name: str, content: str | bytes) -> str:
    p = tmp / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(p)


BINARY = b"\xff\xfe\x00\x89PNG binary"
MISTRAL = dict(architectures=["MistralForCausalLM"], model_type="mistral")
HW = "[[hardware]]\nid = \"h100-sxm\"\n"
GPU = ("[[hardware]]\nid = \"myg\"\nname = \"My GPU\"\nvendor = \"nvidia\"\nkind = \"gpu\"\nmemory_gib = {mem}\n"
       "memory_bandwidth_gbs = {bw}\ninterconnect = \"nvlink4\"\ninterconnect_gbs = 450\n"
       "[hardware.peak_tflops]\nbf16 = 900\n")

# (class before the fix, case, argv builder, text the one-line error must contain)
LCPP_DEVICE = 'name = "llamacpp"\n[override]\ndevice_kernels = [{{ vendor = "apple", {} }}]\n'

CASES = [
    # tracebacks
    ("traceback", "zero attention heads", lambda t: ["estimate", "--model", config(t, "h0", num_attention_heads=0)],
     "num_attention_heads"),
    ("traceback", "NaN hidden size", lambda t: ["estimate", "--model", config(t, "hn", hidden_size=float("nan"))],
     "hidden_size"),
    ("traceback", "infinite hidden size", lambda t: ["estimate", "--model", config(t, "hi", hidden_size=1e999)],
     "hidden_size"),
    ("traceback", "string sliding window", lambda t: ["estimate", "--model", config(t, "sw", sliding_window="abc",
                                                                                   **MISTRAL)], "sliding_window"),
    ("traceback", "moe_layer_freq 0", lambda t: ["estimate", "--model", config(
        t, "mf", architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", moe_layer_freq=0,
        n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=128, kv_lora_rank=64, qk_rope_head_dim=16,
        qk_nope_head_dim=32, v_head_dim=32)], "moe_layer_freq"),
    ("traceback", "decoder_sparse_step 0", lambda t: ["estimate", "--model", config(
        t, "ds", architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", decoder_sparse_step=0, num_experts=8,
        num_experts_per_tok=2, moe_intermediate_size=128)], "decoder_sparse_step"),
    ("traceback", "binary config.json", lambda t: ["estimate", "--model", file(t, "config.json", BINARY)],
     "not UTF-8"),
    ("traceback", "binary trace", lambda t: ["simulate", "--trace", file(t, "t.jsonl", BINARY)], "not UTF-8"),
    ("traceback", "binary Azure trace", lambda t: ["simulate", "--trace", file(t, "t.csv", BINARY)], "not UTF-8"),
    ("traceback", "binary ShareGPT", lambda t: ["simulate", "--trace", file(t, "t.json", BINARY)], "not UTF-8"),
    ("traceback", "binary length file", lambda t: ["simulate", *FAST[:2], "--input-len",
                                                   "file:" + file(t, "l.txt", BINARY)], "not UTF-8"),
    ("traceback", "YAML hardware: [1, 2]", lambda t: ["estimate", "--hardware-file", file(t, "h.yaml", "hardware: [1, "
                                                                                                       "2]")],
     "must be a table"),
    ("traceback", "YAML top-level list", lambda t: ["estimate", "--hardware-file", file(t, "h.yaml", "- 1\n")],
     "list of [[hardware]] tables"),
    ("traceback", "efficiency = 5", lambda t: ["estimate", "--hardware-file", file(
        t, "h.toml", HW + "efficiency = 5\n")], "efficiency must be a table"),
    ("traceback", "string memory", lambda t: ["estimate", "--hardware-file", file(t, "h.toml", HW + 'memory_gib = '
                                                                                                    '"lots"\n')],
     "memory_gib"),
    ("traceback", "uniform:1:inf", lambda t: ["simulate", *FAST[:2], "--input-len", "uniform:1:inf"], "HI"),
    ("traceback", "--seed -1", lambda t: ["simulate", *FAST, "--seed", "-1"], "--seed"),
    ("traceback", "--output into a missing folder", lambda t: ["simulate", *FAST, "--output", str(t / "no" / "x.csv")],
     "does not exist"),
    ("traceback", "profile --out into a missing folder", lambda t: ["profile", "--no-microbench", "--out",
                                                                     str(t / "no" / "p.toml")], "does not exist"),
    ("traceback", "trace prefix_tokens 'x'", lambda t: ["simulate", "--trace", file(
        t, "p.jsonl", '{"timestamp": 0, "input_tokens": 10, "output_tokens": 5, "prefix_id": 1, "prefix_tokens": '
                      '"x"}\n')],
     "prefix_tokens"),
    ("traceback", "trace prefix_id [1]", lambda t: ["simulate", "--trace", file(
        t, "p.jsonl", '{"timestamp": 0, "input_tokens": 10, "output_tokens": 5, "prefix_id": [1]}\n')], "prefix_id"),
    ("traceback", "ShareGPT turns that are not objects", lambda t: ["simulate", "--trace", file(
        t, "s.json", '[{"conversations": [1, 2]}]')], "conversations"),
    ("traceback", "a tokenizer that is not one", lambda t: ["simulate", "--trace", file(
        t, "s.json", '[{"conversations": [{"value": "hello there"}, {"value": "general kenobi"}]}]'),
        "--tokenizer", file(t, "tok.json", BINARY)], "tokenizer"),
    ("traceback", "calibrate on a binary file", lambda t: ["calibrate", "--hardware", file(t, "h.toml", BINARY)],
     "not UTF-8"),
    ("traceback", "engine override host = 5", lambda t: ["estimate", "--engine-file", file(
        t, "e.toml", 'name = "vllm"\n[override]\nhost = 5\n')], "host must be a table"),
    ("traceback", "engine override of the wrong type", lambda t: ["estimate", "--engine-file", file(
        t, "e.toml", 'name = "vllm"\n[override]\nfrontend = { request_s = "x" }\n')], "frontend.request_s"),
    # thirtieth pass (a helper's review): trtllm-bench's batch rule from an engine file
    ("traceback", "trtllm-bench rounding to steps of 0", lambda t: [
        "simulate", "--engine", "trtllm@1.2", "--frontend", "none", "--weights", "fp8", "--num-requests", "5",
        "--engine-file", file(t, "e.toml", 'name = "trtllm"\n[override]\nbench_batch = { seq_steps = '
                              '[[256, 0], [0, 256]] }\n')], "seq_steps step must be"),
    ("traceback", "trtllm-bench bytes for a format that does not exist", lambda t: [
        "simulate", "--engine", "trtllm@1.2", "--frontend", "none", "--weights", "fp8", "--num-requests", "5",
        "--engine-file", file(t, "e.toml", 'name = "trtllm"\n[override]\nbench_batch = { formats = { fp9 = 1.0 } }\n')],
     "unknown format 'fp9'"),
    ("traceback", "--num-requests 10^9 (allocated before failing)", lambda t: ["simulate", "--num-requests",
                                                                           "1000000000"], "--num-requests"),
    # hangs
    ("hang", "NaN trace timestamp", lambda t: ["simulate", "--trace", file(
        t, "n.jsonl", '{"timestamp": NaN, "input_tokens": 10, "output_tokens": 5}\n'
                      '{"timestamp": 1, "input_tokens": 10, "output_tokens": 5}\n')], "timestamp"),
    ("hang", "NaN Azure timestamp", lambda t: ["simulate", "--trace", file(
        t, "n.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nnan,10,5\n1,10,5\n")], "TIMESTAMP"),
    ("hang", "infinite gamma shape", lambda t: ["simulate", *FAST, "--request-rate", "1", "--arrival", "gamma",
                                                "--burstiness", "inf"], "--burstiness"),
    ("hang", "10^9 layers", lambda t: ["estimate", "--model", config(t, "l9", num_hidden_layers=10**9)],
     "num_hidden_layers"),
    # confident nonsense
    ("nonsense", "infinite trace timestamp (NaN latencies)", lambda t: ["simulate", "--trace", file(
        t, "i.jsonl", '{"timestamp": Infinity, "input_tokens": 10, "output_tokens": 5}\n')], "timestamp"),
    ("nonsense", "negative interconnect bandwidth", lambda t: ["estimate", "--tp", "2", "--hardware-file", file(
        t, "h.toml", HW + "interconnect_gbs = -900\n")], "interconnect_gbs"),
    ("nonsense", "negative price", lambda t: ["estimate", "--hardware-file", file(
        t, "h.toml", HW + "price_per_hour_usd = -3\n")], "price_per_hour_usd"),
    ("nonsense", "infinite peak", lambda t: ["estimate", "--hardware-file", file(
        t, "h.toml", HW + "[hardware.peak_tflops]\nbf16 = inf\n")], "peak_tflops.bf16"),
    ("nonsense", "negative context length", lambda t: ["estimate", "--model", config(
        t, "mp", max_position_embeddings=-1)], "max_position_embeddings"),
    ("nonsense", "a prompt beyond the context", lambda t: ["estimate", "--input-len", "1000000"], "context length"),
    ("nonsense", "explain beyond the context", lambda t: ["explain", "--input-len", "10000000"], "context length"),
    ("nonsense", "normal:nan:1 lengths", lambda t: ["simulate", *FAST[:2], "--input-len", "normal:nan:1"], "MEAN"),
    ("nonsense", "lognormal:100:nan lengths", lambda t: ["simulate", *FAST[:2], "--input-len", "lognormal:100:nan"],
     "SIGMA"),
    ("nonsense", "an SLA bound of 1e400 ms", lambda t: ["simulate", *FAST, "--sla", "p95_ttft<=" + "9" * 400 + "ms"],
     "SLA objective"),
    ("nonsense", "profile --threads -1", lambda t: ["profile", "--no-microbench", "--threads", "-1", "--out",
                                                     str(t / "p.toml")], "--threads"),
    ("nonsense", "negative Azure token counts", lambda t: ["simulate", "--trace", file(
        t, "n.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,-10,5\n1,10,5\n")], "ContextTokens"),
    # silent substitution
    ("substitution", "compare --input-len 0", lambda t: ["compare", "--try", "kv=fp8", "--static",
                                                         "--input-len", "0"], "input_len"),
    ("substitution", "compare --output-len 0", lambda t: ["compare", "--try", "kv=fp8", "--static",
                                                          "--output-len", "0"], "output_len"),
    ("substitution", "fractional uniform bounds", lambda t: ["simulate", *FAST[:2], "--input-len", "uniform:1.5:2.5"],
     "whole number"),
    ("substitution", "fractional trace tokens", lambda t: ["simulate", "--trace", file(
        t, "f.jsonl", '{"timestamp": 0, "input_tokens": 10.7, "output_tokens": 5}\n')], "input_tokens"),
    ("substitution", "boolean trace tokens", lambda t: ["simulate", "--trace", file(
        t, "b.jsonl", '{"timestamp": 0, "input_tokens": true, "output_tokens": 5}\n')], "input_tokens"),
    ("substitution", "fractional length file", lambda t: ["simulate", *FAST[:2], "--input-len",
                                                          "file:" + file(t, "l.json", "[1.5, 2]")], "whole numbers"),
    ("substitution", "tie_word_embeddings 'no'", lambda t: ["estimate", "--model", config(
        t, "tw", tie_word_embeddings="no")], "tie_word_embeddings"),
    ("substitution", "architectures as a string", lambda t: ["estimate", "--model", config(
        t, "as", architectures="LlamaForCausalLM")], "architectures"),
    ("substitution", "GPTQ bits as a string", lambda t: ["estimate", "--model", config(
        t, "gb", quantization_config={"quant_method": "gptq", "bits": "4", "group_size": 128})], "bits must be"),
    ("nonsense", "AWQ group size 0", lambda t: ["estimate", "--model", config(
        t, "ag", quantization_config={"quant_method": "awq", "bits": 4, "group_size": 0})], "group_size must be"),
    ("nonsense", "FP8 block size [0, 128]", lambda t: ["estimate", "--model", config(
        t, "fb", quantization_config={"quant_method": "fp8", "weight_block_size": [0, 128]})], "weight_block_size"),
    ("substitution", "quantization_config as a string", lambda t: ["estimate", "--model", config(
        t, "qc", quantization_config="fp8")], "quantization_config"),
    ("substitution", "profile --device cuda without a GPU", lambda t: ["profile", "--no-microbench", "--device", "cuda",
                                                                       "--out", str(t / "p.toml")], "--device"),
    ("substitution", "profile --device foo", lambda t: ["profile", "--no-microbench", "--device", "foo", "--out",
                                                         str(t / "p.toml")], "--device"),
    ("substitution", "engine override with an unknown key", lambda t: ["estimate", "--engine-file", file(
        t, "e.toml", 'name = "vllm"\n[override]\nhost = { step_s = 1e-3, foo = 1 }\n')], "host.foo"),
    ("substitution", "engine override: an unknown device kernel factor", lambda t: [
        "estimate", "--engine", "llamacpp", "--engine-file", file(t, "e.toml", LCPP_DEVICE.format(
            "kernels = { fused_dequantise = true }"))], "fused_dequantise"),
    ("substitution", "engine override: a device kernel flag given as a number", lambda t: [
        "estimate", "--engine", "llamacpp", "--engine-file", file(t, "e.toml", LCPP_DEVICE.format(
            "kernels = { fused_dequant = 3 }"))], "fused_dequant"),
    ("traceback", "engine override: device_kernels without a kernels table", lambda t: [
        "estimate", "--engine", "llamacpp", "--engine-file", file(t, "e.toml", LCPP_DEVICE.format("source = ''"))],
     "device_kernels"),
    ("substitution", "a duplicated SLA objective", lambda t: ["simulate", *FAST, "--sla",
                                                              "p95_ttft<=1ms,p95_ttft<=2ms"], "twice"),
    # misleading
    ("misleading", "calibrate --hardware missing.toml", lambda t: ["calibrate", "--hardware", str(t / "missing.toml")],
     "does not exist"),
    ("misleading", "profile --out a directory", lambda t: ["profile", "--no-microbench", "--out", str(t)],
     "is a directory"),
    ("misleading", "--hardware-file a directory", lambda t: ["estimate", "--hardware-file", str(t)], "is a directory"),
    ("misleading", "a length file that is a directory", lambda t: ["simulate", *FAST[:2], "--input-len", f"file:{t}"],
     "is a directory"),
    ("misleading", "SLA in scientific notation", lambda t: ["simulate", *FAST, "--sla", "p95_ttft<=1e999ms"],
     "must have a limit"),
    # values of the wrong type for an option (the parser's errors are one line too)
    ("parser", "--tp x", lambda t: ["estimate", "--tp", "x"], "--tp"),
    ("parser", "unknown option", lambda t: ["estimate", "--tpp", "2"], "--tpp"),
    # options this pass added (parallel layouts, traffic shapes): refused in one line from the start
    ("new", "--ep on a dense model", lambda t: ["simulate", *FAST, "--ep", "2"], "no MoE layers"),
    ("new", "--ep not dividing tp*dp", lambda t: ["estimate", "--model", "mixtral-8x7b", "--tp", "2", "--ep", "4",
                                                  "--dp", "1"], "must divide tp*dp"),
    ("new", "--nodes not dividing the GPUs", lambda t: ["estimate", "--model", "mixtral-8x7b", "--tp", "2",
                                                        "--nodes", "3"], "must divide"),
    ("new", "a replica wider than one server, on one", lambda t: ["estimate", "--model", "llama-3.1-70b", "--tp",
                                                                  "16", "--nodes", "1"], "spread it over --nodes 2"),
    ("new", "a replica over servers without a NIC", lambda t: ["estimate", "--gpu", "rtx-4090", "--tp", "2",
                                                               "--nodes", "2"], "has no network bandwidth"),
    ("new", "--expert-skew below 1", lambda t: ["estimate", "--model", "mixtral-8x7b", "--tp", "2", "--ep", "2",
                                                "--expert-skew", "0.5"], "expert_skew"),
    ("new", "--timeout-s 0", lambda t: ["simulate", *FAST, "--timeout-s", "0"], "timeout"),
    ("new", "--classes without a share", lambda t: ["simulate", *FAST, "--classes", "chat"], "NAME=SHARE"),
    ("new", "--scheduling-policy unknown", lambda t: ["simulate", *FAST, "--scheduling-policy", "lifo"],
     "--scheduling-policy"),
    ("new", "--rate-profile unreadable", lambda t: ["simulate", *FAST, "--rate-profile", "fast"], "DURATION:RATE"),
    ("new", "--rate-profile with --request-rate", lambda t: ["simulate", *FAST, "--rate-profile", "60s:5",
                                                             "--request-rate", "3"], "drop --request-rate"),
    ("new", "--moe-layouts unknown", lambda t: ["plan", "--model", "mixtral-8x7b", "--moe-layouts", "ep"],
     "unknown MoE layout"),
    # found by a fuzzing pass (ninth): each was a traceback or a run that did not end
    ("new", "hardware with 1e300 GiB", lambda t: ["estimate", "--gpu", "myg", "--hardware-file", file(
        t, "hw.toml", GPU.format(mem="1e300", bw="3000"))], "memory_gib"),
    ("new", "hardware with 1e-300 GB/s", lambda t: ["estimate", "--gpu", "myg", "--hardware-file", file(
        t, "hw.toml", GPU.format(mem="80", bw="1e-300"))], "memory_bandwidth_gbs"),
    ("new", "explain --batch 1e14", lambda t: ["explain", "--batch", "99999999999999"], "batch must be"),
    ("new", "--output on /proc", lambda t: ["simulate", *FAST, "--output", "/proc/flopwise-x.csv"],
     "cannot be written"),
    ("new", "--html on /proc", lambda t: ["plan", "--html", "/proc/flopwise-x.html"], "cannot be written"),
    ("new", "unclosed IPv6 URL", lambda t: ["bench", "--url", "http://[::1", "--num-requests", "1",
                                            "--out", str(t / "b")], "not a valid URL"),
    # found by the eleventh pass's sweep: each was a hang, a traceback or a value taken without a word
    ("hang", "a 10^8-replica prefill pool", lambda t: ["simulate", *FAST, "--disaggregate",
                                                       "prefill=99999999xtp1,decode=1xtp1"], "prefill replicas"),
    ("substitution", "a pool named twice", lambda t: ["simulate", *FAST, "--disaggregate",
                                                      "prefill=1xtp1,decode=1xtp1,decode=2xtp1"], "twice"),
    ("substitution", "--replicas with --disaggregate", lambda t: ["simulate", *FAST, "--replicas", "3",
                                                                  "--disaggregate", "prefill=1xtp1,decode=1xtp1"],
     "drop --replicas"),
    ("nonsense", "--cold-start nan", lambda t: ["simulate", *FAST, "--replicas", "2", "--autoscale", "1..3",
                                                "--cold-start", "nan"], "--cold-start"),
    ("nonsense", "--engine-start-s -1", lambda t: ["simulate", *FAST, "--replicas", "2", "--autoscale", "1..3",
                                                   "--engine-start-s", "-1"], "--engine-start-s"),
    ("traceback", "bench --tokenizer not JSON", lambda t: ["bench", "--url", "http://127.0.0.1:9", "--tokenizer",
                                                          file(t, "tokenizer.json", "garbage"), "--out",
                                                          str(t / "b")], "not a Hugging Face tokenizer.json"),
    ("traceback", "bench --ca-bundle not PEM", lambda t: ["bench", "--url", "http://127.0.0.1:9", "--ca-bundle",
                                                         file(t, "ca.pem", "not a certificate"), "--out",
                                                         str(t / "b")], "not a readable PEM"),
    ("nonsense", "bench --temperature nan", lambda t: ["bench", "--url", "http://127.0.0.1:9", "--temperature",
                                                       "nan", "--out", str(t / "b")], "--temperature"),
    ("substitution", "bench --gpu without --predict", lambda t: ["bench", "--url", "http://127.0.0.1:9", "--gpu",
                                                                 "foo", "--out", str(t / "b")], "add --predict"),
    ("substitution", "bench --enforce-eager without --predict", lambda t: ["bench", "--url", "http://127.0.0.1:9",
                                                                          "--enforce-eager", "--out", str(t / "b")],
     "add --predict"),
    ("substitution", "bench --cuda-graph-max-bs without --predict",
     lambda t: ["bench", "--url", "http://127.0.0.1:9", "--cuda-graph-max-bs", "64", "--out", str(t / "b")],
     "add --predict"),
    ("nonsense", "bench --predict --cuda-graph-max-bs -1",
     lambda t: ["bench", "--url", "http://127.0.0.1:9", "--predict", "--gpu", "h100-sxm", "--model-config",
                "llama-3.1-8b", "--cuda-graph-max-bs", "-1", "--out", str(t / "b")], "cuda_graph_max_bs"),
    ("new", "estimate --attention-backend flashinfr",
     lambda t: ["estimate", "--model", "llama-3.1-8b", "--engine", "sglang@0.4.6", "--attention-backend", "flashinfr"],
     "Did you mean: flashinfer"),
    ("nonsense", "plan --attention-backend on an engine without the switch",
     lambda t: ["plan", "--engine", "trtllm", "--attention-backend", "flashinfer"], "no attention-backend switch"),
    ("substitution", "bench --attention-backend without --predict",
     lambda t: ["bench", "--url", "http://127.0.0.1:9", "--attention-backend", "flashinfer", "--out", str(t / "b")],
     "add --predict"),
    ("nonsense", "bench --predict --attention-backend the engine does not take, model asked of the server",
     lambda t: ["bench", "--url", "http://127.0.0.1:9", "--predict", "--gpu", "h100-sxm", "--engine", "sglang",
                "--attention-backend", "flash", "--out", str(t / "b")], "no attention backend 'flash'"),
    ("substitution", "bench --moe-backend without --predict",
     lambda t: ["bench", "--url", "http://127.0.0.1:9", "--moe-backend", "trtllm", "--out", str(t / "b")],
     "add --predict"),
    ("nonsense", "bench --predict --moe-backend trtllm on an H100, model asked of the server",
     lambda t: ["bench", "--url", "http://127.0.0.1:9", "--predict", "--gpu", "h100-sxm", "--moe-backend", "trtllm",
                "--out", str(t / "b")], "datacenter Blackwell"),
    ("substitution", "bench --pdl without --predict",
     lambda t: ["bench", "--url", "http://127.0.0.1:9", "--pdl", "--out", str(t / "b")], "add --predict"),
    ("nonsense", "bench --predict --pdl on vLLM, model asked of the server",
     lambda t: ["bench", "--url", "http://127.0.0.1:9", "--predict", "--gpu", "h100-sxm", "--pdl",
                "--out", str(t / "b")], "no such switch"),
    ("nonsense", "plan --enforce-eager on llama.cpp", lambda t: ["plan", "--engine", "llamacpp", "--enforce-eager"],
     "no eager"),
    ("nonsense", "plan --pdl on vLLM", lambda t: ["plan", "--pdl"], "no such switch"),
    ("substitution", "plan --cuda-graph-max-bs -1", lambda t: ["plan", "--cuda-graph-max-bs", "-1"], "whole number"),
    ("misleading", "bench --predict on an unknown GPU", lambda t: ["bench", "--url", "http://127.0.0.1:9",
                                                                   "--predict", "--gpu", "foo", "--out",
                                                                   str(t / "b")], "unknown GPU"),
    ("substitution", "engine version 1e3", lambda t: ["estimate", "--engine", "vllm@1e3"], "engine version"),
    ("substitution", "engine version 0.11.0.0.0", lambda t: ["estimate", "--engine", "vllm@0.11.0.0.0"],
     "engine version"),
    ("substitution", "engine with an empty version", lambda t: ["estimate", "--engine", "vllm@"], "after '@'"),
    ("nonsense", "vLLM on Apple silicon", lambda t: ["estimate", "--gpu", "apple-m2-ultra"], "no backend"),
    ("nonsense", "TensorRT-LLM on an AMD GPU", lambda t: ["estimate", "--gpu", "mi300x", "--engine", "trtllm"],
     "no backend"),
    ("nonsense", "fp8 weights on a Pascal GPU", lambda t: ["estimate", "--gpu", "tesla-p40", "--weights", "fp8"],
     "weight-only kernel"),
    ("misleading", "plan fp8 on T4: an empty reason", lambda t: ["plan", "--gpus", "t4", "--weights", "fp8"],
     "T4 16GB has neither: use fp16, int8 or int4 weights"),
    ("nonsense", "plan --rate 1e30", lambda t: ["plan", "--rate", "1e30"], "--rate"),
    ("nonsense", "estimate a batch the KV pool cannot hold", lambda t: ["estimate", "--batch", "1000000"],
     "holds at most 387 sequences of 1,280 tokens"),
    ("misleading", "explain a batch the KV pool cannot hold", lambda t: ["explain", "--batch", "1000"],
     "batch 1000 does not fit"),
    ("nonsense", "plan --objective cost on a GPU without a price", lambda t: ["plan", "--gpus", "h100-sxm,h20",
                                                                               "--objective", "cost"],
     "h20 has no price"),
    ("nonsense", "TGI with pipeline stages", lambda t: ["estimate", "--engine", "tgi", "--pp", "2"], "has no PP"),
    ("nonsense", "llama.cpp with expert parallelism", lambda t: ["estimate", "--engine", "llamacpp", "--model",
                                                                 "qwen3-30b-a3b", "--tp", "2", "--ep", "2",
                                                                 "--weights", "q4_k_m"], "has no EP"),
    ("nonsense", "engine file with an unknown parallelism", lambda t: ["estimate", "--engine-file", file(
        t, "e.toml", 'name = "vllm"\n[override]\nparallelism = ["tp", "cp"]\n')], "parallelism must list some of"),
    ("nonsense", "engine file device without a kind", lambda t: ["estimate", "--engine-file", file(
        t, "e.toml", 'name = "vllm"\n[override]\ndevices = ["nvidia"]\n')], "VENDOR:KIND"),
    ("substitution", "a hardware id given twice", lambda t: ["estimate", "--gpu", "myg", "--hardware-file", file(
        t, "hw.toml", GPU.format(mem="80", bw="3000") + GPU.format(mem="40", bw="1500"))], "twice"),
    ("misleading", "a draft that does not fit, left out of the sum", lambda t: [
        "simulate", *FAST, "--engine", "vllm@0.32", "--model", "llama-3.3-70b", "--gpu", "h100-sxm", "--tp", "2",
        "--num-gpus", "2", "--speculative", "draft:llama-3.1-8b,k=4,alpha=0.7"], "draft 7.5"),
    ("nonsense", "a draft with another vocabulary", lambda t: ["compare", "--model", "mistral-7b", "--try",
                                                               "spec=draft:llama-3.2-1b,k=4,alpha=0.7"],
     "share the target's tokenizer"),
    ("nonsense", "two-batch overlap on a dense model", lambda t: ["estimate", "--engine", "sglang",
                                                                  "--two-batch-overlap"], "no MoE layers"),
    ("nonsense", "the target as its own draft", lambda t: ["explain", "--draft", "llama-3.1-8b"], "not smaller"),
    ("nonsense", "experts-only weights on a dense model", lambda t: ["estimate", "--weights", "mxfp4-moe"],
     "has none"),
    ("nonsense", "AWQ weights on llama.cpp", lambda t: ["estimate", "--engine", "llamacpp", "--gpu", "rtx-4090",
                                                        "--weights", "int4-awq"], "not a GGUF type"),
    ("substitution", "--family on a catalog model", lambda t: ["estimate", "--family", "qwen3"], "drop --family"),
    ("substitution", "--disaggregate with --tp", lambda t: ["simulate", "--disaggregate", "prefill=1xtp1,decode=1xtp1",
                                                            "--tp", "4", *FAST], "drop --tp"),
    ("misleading", "SGLang's disaggregated decode pool", lambda t: [
        "simulate", "--engine", "sglang", "--disaggregate", "prefill=1xtp1,decode=1xtp1", *FAST],
     "add --scheduler vllm"),
    ("misleading", "a fleet behind one server", lambda t: ["simulate", "--replicas", "4", "--replicas-per-server",
                                                           "2", *FAST], "servers of their own"),
    ("substitution", "an SGLang knob under vLLM's scheduler", lambda t: ["simulate", "--enable-mixed-chunk", *FAST],
     "would ignore them"),
    ("substitution", "profile --id ''", lambda t: ["profile", "--no-microbench", "--id", "", "--out",
                                                   str(t / "p.toml")], "--id is empty"),
    ("substitution", "an empty --weights", lambda t: ["estimate", "--weights", ""], "(--weights) is empty"),
    ("substitution", "an empty --workload", lambda t: ["simulate", "--workload", " ", *FAST], "(--workload) is empty"),
    ("substitution", "bench --request-rate with an empty entry", lambda t: [
        "bench", "--url", "http://127.0.0.1:9", "--request-rate", "1,,2", "--out", str(t / "b")], "empty entry"),
    ("nonsense", "hidden size not a multiple of the heads", lambda t: ["estimate", "--model", config(
        t, "hd", hidden_size=2049, head_dim=None)], "not a multiple of num_attention_heads"),
    ("nonsense", "a trace spanning 1e300 s", lambda t: ["simulate", "--trace", file(
        t, "t.jsonl", '{"timestamp": 0, "input_tokens": 10, "output_tokens": 5}\n'
                      '{"timestamp": 1e300, "input_tokens": 10, "output_tokens": 5}\n')], "more than a year"),
    ("nonsense", "a trace in milliseconds over two years", lambda t: ["plan", "--trace", file(
        t, "ms.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,100,10\n70000000000,100,10\n")],
     "convert milliseconds"),
    ("nonsense", "Azure trace mixing dates and seconds", lambda t: ["simulate", "--trace", file(
        t, "a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,100,10\n5.0,100,10\n")],
     "one form"),
    # twenty-ninth pass: a GGUF type on an engine that cannot load one was simulated as if it could
    ("nonsense", "GGUF on TensorRT-LLM", lambda t: ["simulate", "--engine", "trtllm", "--weights", "q4_k_m",
                                                    "--num-requests", "5"], "does not load GGUF files"),
    ("nonsense", "GGUF on TGI", lambda t: ["estimate", "--engine", "tgi", "--weights", "q6_k"],
     "does not load GGUF files"),
    # thirtieth pass: vLLM loads GGUF from 0.5.5 only
    ("nonsense", "GGUF on vLLM 0.5.4", lambda t: ["estimate", "--engine", "vllm@0.5.4", "--weights", "q4_k_m"],
     "vLLM 0.5.4 does not load GGUF files"),
    ("nonsense", "a GGUF type vLLM's kernels lack", lambda t: [
        "simulate", "--model", "gpt-oss-20b", "--engine", "vllm", "--weights", "mxfp4_moe", "--num-requests", "3"],
     "GGUF kernels have no MXFP4_MOE"),
    # thirty-first pass: --stream-interval
    ("new", "a stream interval on a server that streams every token", lambda t: [
        "simulate", "--engine", "llamacpp", "--stream-interval", "8", "--num-requests", "3"],
     "llama.cpp b7000 streams every token"),
    ("new", "a stream interval of 0", lambda t: [
        "simulate", "--engine", "sglang", "--stream-interval", "0", "--num-requests", "3"],
     "--stream-interval must be an integer in [1, 1,000,000], got 0"),
    ("new", "bench --stream-interval without --predict",
     lambda t: ["bench", "--url", "http://127.0.0.1:9", "--stream-interval", "8", "--out", str(t / "b")],
     "add --predict"),
    ("new", "bench --predict --stream-interval on llama.cpp, model asked of the server",
     lambda t: ["bench", "--url", "http://127.0.0.1:9", "--predict", "--gpu", "h100-sxm", "--engine", "llamacpp",
                "--stream-interval", "8", "--out", str(t / "b")], "streams every token"),
    ("nonsense", "SGLang reading new requests every 0 steps", lambda t: [
        "simulate", "--scheduler", "sglang", "--scheduler-recv-interval", "0", "--num-requests", "5"],
     "--scheduler-recv-interval must be an integer >= 1"),
    ("nonsense", "llama.cpp-style passes with data-parallel attention", lambda t: [
        "estimate", "--engine", "sglang", "--model", "deepseek-v2-lite", "--dp", "2", "--engine-file",
        file(t, "e.toml", 'name = "sglang"\n[override]\nkernels = { ubatch_tokens = 512 }\n')],
     "priced without data-parallel attention"),
    # thirty-sixth pass: what a new user tried
    ("nonsense", "tensor parallelism inside a single-device machine", lambda t: [
        "estimate", "--gpu", "apple-m2-ultra", "--engine", "llamacpp", "--weights", "q4_k_m", "--tp", "8"],
     "is the one device of its machine"),
    ("nonsense", "an expert skew without expert parallelism", lambda t: [
        "estimate", "--gpu", "h100-sxm", "--model", "mixtral-8x7b", "--tp", "2", "--expert-skew", "2"],
     "expert_skew applies with expert parallelism"),
    ("nonsense", "two-batch overlap without expert parallelism", lambda t: [
        "estimate", "--gpu", "h100-sxm", "--model", "mixtral-8x7b", "--tp", "2", "--two-batch-overlap"],
     "two_batch_overlap applies with expert parallelism"),
    ("nonsense", "a speculative method the release does not serve", lambda t: [
        "simulate", "--engine", "vllm@0.8.0", "--speculative", "eagle3,k=3,accepted=2.6", "--num-requests", "3"],
     "vLLM 0.8.0 does not serve 'eagle3'"),
    ("nonsense", "a draft model on vLLM's V1 before 0.15", lambda t: [
        "simulate", "--engine", "vllm@0.12", "--speculative", "draft:llama-3.2-1b,k=4,alpha=0.7", "--num-requests",
        "3"], "vLLM 0.12 does not serve 'draft'"),
    ("nonsense", "data-parallel attention on a vLLM before it had any", lambda t: [
        "estimate", "--engine", "vllm@0.8.2", "--model", "qwen3-30b-a3b", "--tp", "1", "--dp", "2", "--ep", "2"],
     "vLLM 0.8.2 has no DP (dp=2)"),
    ("nonsense", "expert parallelism on a vLLM before it had any", lambda t: [
        "estimate", "--engine", "vllm@0.7.3", "--model", "qwen3-30b-a3b", "--tp", "2", "--ep", "2"],
     "vLLM 0.7.3 has no EP (ep=2)"),
    ("misleading", "bench --sweep without --sla, told before the server is asked", lambda t: [
        "bench", "--url", "http://127.0.0.1:9", "--sweep", "--out", str(t / "b")], "pass --sla too"),
    ("misleading", "bench with a dataset that is not there, told before the server is asked", lambda t: [
        "bench", "--url", "http://127.0.0.1:9", "--dataset", str(t / "none.json"), "--out", str(t / "b")],
     "none.json: no such file"),
    ("nonsense", "pipeline stages on SGLang before 0.4.7", lambda t: [
        "estimate", "--engine", "sglang@0.4.6", "--model", "llama-3.1-70b", "--pp", "2", "--weights", "fp8"],
     "SGLang 0.4.6 has no PP (pp=2)"),
    ("nonsense", "plan's data-parallel layouts only, on SGLang before 0.4", lambda t: [
        "plan", "--engine", "sglang@0.3.6", "--model", "qwen3-30b-a3b", "--moe-layouts", "dep"],
     "SGLang 0.3.6 has no DP"),
]


@pytest.mark.parametrize("kind,case,argv,expect", CASES, ids=[c[1] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(kind, case, argv, expect, tmp_path, capsys):
    if case.endswith("without a GPU") and discover().cuda:
        pytest.skip("this machine has a CUDA GPU")
    code = run(argv(tmp_path))
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("error: ") and "\n" not in err, err
    assert expect in err, err
    assert "Traceback" not in err


def test_cases_by_class():
    """The counts the report gives (issue 12: how many bad inputs the tests try, by class)."""
    counts: dict[str, int] = {}
    for kind, *_ in CASES:
        counts[kind] = counts.get(kind, 0) + 1
    assert counts == {"traceback": 32, "hang": 5, "nonsense": 58, "substitution": 36, "misleading": 13, "parser": 2,
                      "new": 23}


def test_a_defaulted_max_num_seqs_follows_a_smaller_token_budget():
    """vLLM lowers a max_num_seqs it defaulted to a token budget set below it (EngineArgs._set_default_args), so
    `--max-num-batched-tokens 512` alone starts on an H100 (default 1024 sequences); SGLang keeps its own."""
    from flopwise.api import deployment

    assert deployment("llama-3.1-8b", "h100-sxm", max_num_batched_tokens=512).max_num_seqs == 512
    assert deployment("llama-3.1-8b", "h100-sxm").max_num_seqs == 1024
    assert deployment("llama-3.1-8b", "h100-sxm", max_num_batched_tokens=512, engine="sglang").max_num_seqs > 512


def test_llama_cpp_serves_a_gpu_checkpoint_from_its_gguf_and_explains_with_q8_0(capsys):
    """A user who names no format: an FP8 checkpoint on llama.cpp is priced as the Q8_0 GGUF a conversion makes
    (it was refused as 'not a GGUF type'); its fit suggestions name GGUF types only; explain's 8-bit section is
    Q8_0 there (it priced int8, which llama.cpp cannot load, and so failed)."""
    assert deployment("minimax-m2", "b200", tp=4, engine="llamacpp").weights.name == "q8_0"
    assert run(["estimate", "--model", "minimax-m2", "--gpu", "b300", "--engine", "llamacpp",
                "--weights", "bf16"]) == 2
    assert "--weights q8_0" in capsys.readouterr().err  # not the fp8-block checkpoint it cannot load
    ex = explain("llama-3.1-8b", "h100-sxm", engine="llamacpp")
    assert next(s for s in ex.sections if s.key == "quantization").text.startswith("q8_0 weights")


def test_a_data_parallel_replica_holds_a_batch_in_every_ranks_pool():
    """Under attention DP each of the dp ranks holds its share of the batch: the fit check counts the dp pools once
    (`max_sequences` is the replica's; a pass counted them again, taking a DP4 replica of 1,858 for 7,432)."""
    dep = deployment("qwen3-30b-a3b", "h100-sxm", tp=1, dp=4, ep=4)
    plan = memory_plan(dep)
    per_rank = int(plan.kv_pool_bytes // plan.block_bytes) // blocks_per_sequence(dep, 1024 + 256)
    most = max_sequences(dep, 1024 + 256)
    assert 4 * per_rank <= most < 4 * (per_rank + 1)
    assert flopwise.estimate("qwen3-30b-a3b", "h100-sxm", tp=1, dp=4, ep=4, batch=most).max_batch == most
    with pytest.raises(DoesNotFitError, match=f"holds at most {most:,} sequences"):
        flopwise.estimate("qwen3-30b-a3b", "h100-sxm", tp=1, dp=4, ep=4, batch=most + 1)


def test_a_trace_span_is_checked_only_where_its_timestamps_set_the_arrivals(tmp_path):
    """Timestamps 1e7 apart (microseconds read as seconds) are refused where they would be replayed; with
    --concurrency only the trace's lengths are used, and the run goes on."""
    path = tmp_path / "ms.jsonl"
    path.write_text("".join(f'{{"timestamp": {i * 1e7}, "input_tokens": 100, "output_tokens": 10}}\n'
                            for i in range(20)))
    assert flopwise.simulate(trace=str(path), concurrency=4).num_requests == 20
    with pytest.raises(flopwise.FlopwiseError, match="more than a year"):
        flopwise.simulate(trace=str(path))


def test_an_empty_api_key_means_none(monkeypatch):
    """bench(api_key="") is a run without credentials, as `os.environ.get("OPENAI_API_KEY", "")` gives it; other
    empty strings are refused. (Checked at the argument guard: no server is contacted.)"""
    with pytest.raises(flopwise.FlopwiseError) as e:
        flopwise.bench("http://127.0.0.1:1", api_key="", num_requests=1, out=None)
    assert "empty" not in str(e.value)
    with pytest.raises(flopwise.FlopwiseError, match=r"tokenizer \(--tokenizer\) is empty"):
        flopwise.bench("http://127.0.0.1:1", tokenizer="", num_requests=1)
