"""adaptive_span's fused inference paths against fused SDPA, on a card's trained spans: time, interleaved.

Run: `.venv/bin/python tests/bench/bench_span_paths.py [--results RESULTS_JSON] [--lengths 64 128 192 256]
[--calls 150]`, by default on cards/minilm-adaptive_span-sst2-seed0/results.json. For each layer of the run
(its learned spans, `module.stats.spans` of results.json, MiniLM's 12 heads of 32), on synthetic q, k, v
(batch 1, no padding, in the (B, N, H, D) memory a layer hands over), four calls alternate `--calls` times:
fused SDPA without a mask (the dense model's attention), one fused call with the whole span bias as mask
([`whole_mask_attention`], what inference runs up to `WHOLE_MASK_LENGTH`), and the fused calls on blocks of 32
and of 64 query rows ([`fused_span_attention`], beyond it). Each call is checked against the whole-mask result
first. Prints, per length, each path's median time summed over the layers and its ratio to SDPA's: the figures
behind `WHOLE_MASK_LENGTH`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from attncard.modules.adaptive_span.attention import (
    AdaptiveSpan,
    fused_block_mask,
    fused_span_attention,
    global_key_shortfall,
    whole_mask_attention,
    whole_span_mask,
)

HEADS, HEAD_DIM = 12, 32


def layer_paths(spans: list[float], length: int, max_span: int, ramp: int) -> dict:
    """The four calls of one layer at `length`, each returning (B, H, N, D)."""
    span = AdaptiveSpan(len(spans), max_span, ramp, init_logit=0.0)
    with torch.no_grad():
        span.span_logits.copy_(torch.logit(torch.tensor(spans).clamp(1e-4, max_span - 1e-2) / max_span))
    query, key, value = (torch.randn(1, length, HEADS, HEAD_DIM).transpose(1, 2) for _ in range(3))
    window = int(span.windows(length).max())
    log_mask = span.log_mask(window).detach()
    whole = whole_span_mask(log_mask, causal=False, global_token=True, length=length)
    missing = global_key_shortfall(log_mask, length)
    scaling = HEAD_DIM**-0.5

    def blocks(rows: int):
        mask = fused_block_mask(log_mask, causal=False, block=rows)
        return lambda: fused_span_attention(
            query, key, value, mask, missing, scaling=scaling, causal=False, global_token=True, window=window
        ).transpose(1, 2)

    return {
        "sdpa": lambda: F.scaled_dot_product_attention(query, key, value, scale=scaling),
        "whole mask": lambda: whole_mask_attention(
            query, key, value, whole, scaling=scaling, causal=False, global_token=True
        ),
        "blocks of 32": blocks(32),
        "blocks of 64": blocks(64),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="cards/minilm-adaptive_span-sst2-seed0/results.json")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 192, 256])
    parser.add_argument("--calls", type=int, default=150)
    args = parser.parse_args()
    module = json.loads(Path(args.results).read_text(encoding="utf-8"))["module"]
    layers, config = module["stats"]["spans"], module["config"]
    torch.manual_seed(0)
    with torch.inference_mode():
        for length in args.lengths:
            total: dict[str, float] = {}
            for spans in layers:
                paths = layer_paths(spans, length, config["max_span"], config["ramp"])
                reference = paths["whole mask"]()
                for name in ("blocks of 32", "blocks of 64"):
                    torch.testing.assert_close(paths[name](), reference, atol=1e-5, rtol=1e-5)
                times: dict[str, list[float]] = {name: [] for name in paths}
                for _ in range(5):
                    for run in paths.values():
                        run()
                for _ in range(args.calls):
                    for name, run in paths.items():
                        start = time.perf_counter()
                        run()
                        times[name].append(time.perf_counter() - start)
                for name, seconds in times.items():
                    total[name] = total.get(name, 0.0) + statistics.median(seconds)
            sdpa = total["sdpa"]
            figures = ", ".join(f"{name} {t * 1e3:.3f} ms ({t / sdpa:.2f}×)" for name, t in total.items())
            print(f"N = {length}, {len(layers)} layers: {figures}", flush=True)


if __name__ == "__main__":
    main()
