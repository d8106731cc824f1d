"""Banded attention kernels (plain torch, fused SDPA, Triton) against the dense reference: outputs, gradients,
NaN safety and dispatch."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attncard.modules.kernels import (
    banded_attention,
    banded_attention_torch,
    banded_cpu,
    dense_banded_reference,
    select_implementation,
    triton_available,
)
from attncard.modules.kernels.banded import banded_attention_sdpa
from attncard.modules.kernels.dispatch import IMPL_ENV_VAR

REPO_ROOT = Path(__file__).resolve().parents[2]
BATCH, HEADS, HEAD_DIM = 2, 3, 16
SCALING = HEAD_DIM**-0.5
TOLERANCE = dict(atol=1e-5, rtol=1e-5)
GRAD_TOLERANCE = dict(atol=1e-5, rtol=1e-4)


def make_inputs(
    length: int,
    *,
    windows: str = "wide",
    padded: bool = False,
    with_global: bool = False,
    bias: str | None = None,
    causal: bool = False,
    seed: int = 0,
) -> tuple[list[torch.Tensor], torch.Tensor, dict]:
    """Random (query, key, value), per-head windows, and the keyword arguments of one test case.

    windows: "wide" mixes 0, a random window below N and one >= N; "narrow" keeps all windows small enough
    that the torch kernel really cuts the sequence into blocks.
    bias: None, "finite" or "-inf" (a distance bias with -inf entries, some covering a head's whole band).
    """
    generator = torch.Generator().manual_seed(seed)
    qkv = [torch.randn(BATCH, HEADS, length, HEAD_DIM, generator=generator) for _ in range(3)]
    if windows == "wide":
        middle = int(torch.randint(1, max(length, 2), (), generator=generator))
        window = torch.tensor([0, middle, length + 3])[torch.randperm(HEADS, generator=generator)]
    else:
        window = torch.tensor([0, 2, 9])
    kwargs: dict = dict(scaling=SCALING, causal=causal)
    if padded:
        lengths = torch.tensor([length, max(1, length - 9)])
        kwargs["key_padding_mask"] = torch.arange(length)[None, :] < lengths[:, None]
    if with_global:
        kwargs["global_index"] = torch.tensor([0, length // 2])
    if bias is not None:
        distance_bias = torch.randn(HEADS, int(window.max()) + 1, generator=generator)
        if bias == "-inf":
            distance_bias[0, 1:] = float("-inf")
            distance_bias[1, 3:5] = float("-inf")
            distance_bias[2, 0] = float("-inf")
        kwargs["distance_bias"] = distance_bias
    return qkv, window, kwargs


BOTH = (False, True)
CASES = list(itertools.product(BOTH, BOTH, (None, "finite", "-inf"), BOTH))
CASE_IDS = [
    f"{'causal' if c else 'bidir'}-{'global' if g else 'noglobal'}-bias_{b}-{'padded' if p else 'full'}"
    for c, g, b, p in CASES
]


@pytest.mark.parametrize("length", [1, 9, 70])
@pytest.mark.parametrize("windows", ["wide", "narrow"])
@pytest.mark.parametrize(("causal", "with_global", "bias", "padded"), CASES, ids=CASE_IDS)
def test_torch_kernel_matches_reference(length, windows, causal, with_global, bias, padded):
    qkv, window, kwargs = make_inputs(
        length, windows=windows, padded=padded, with_global=with_global, bias=bias, causal=causal
    )
    expected = dense_banded_reference(*qkv, window, **kwargs)
    for block_size in (None, 8):
        actual = banded_attention_torch(*qkv, window, block_size=block_size, **kwargs)
        assert not actual.isnan().any()
        torch.testing.assert_close(actual, expected, **TOLERANCE)


@pytest.mark.parametrize(("causal", "with_global", "padded"), list(itertools.product(BOTH, BOTH, BOTH)))
@pytest.mark.parametrize("windows", ["wide", "narrow"])
def test_torch_kernel_gradients_match_reference(causal, with_global, padded, windows):
    qkv, window, kwargs = make_inputs(
        37, windows=windows, padded=padded, with_global=with_global, bias="-inf", causal=causal, seed=1
    )
    upstream = torch.randn(BATCH, HEADS, 37, HEAD_DIM, generator=torch.Generator().manual_seed(2))

    def gradients(attention) -> list[torch.Tensor]:
        leaves = [t.clone().requires_grad_() for t in qkv]
        distance_bias = kwargs["distance_bias"].clone().requires_grad_()
        output = attention(*leaves, window, **{**kwargs, "distance_bias": distance_bias})
        output.backward(upstream)
        return [t.grad for t in [*leaves, distance_bias]]

    expected = gradients(dense_banded_reference)
    actual = gradients(lambda *args, **kw: banded_attention_torch(*args, block_size=8, **kw))
    for name, got, want in zip(("query", "key", "value", "distance_bias"), actual, expected, strict=True):
        assert not got.isnan().any(), name
        torch.testing.assert_close(got, want, **GRAD_TOLERANCE, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("length", [1, 9, 70])
@pytest.mark.parametrize("windows", ["wide", "narrow"])
@pytest.mark.parametrize(("causal", "with_global", "bias", "padded"), CASES, ids=CASE_IDS)
def test_sdpa_kernel_matches_reference(length, windows, causal, with_global, bias, padded):
    qkv, window, kwargs = make_inputs(
        length, windows=windows, padded=padded, with_global=with_global, bias=bias, causal=causal
    )
    expected = dense_banded_reference(*qkv, window, **kwargs)
    # Default blocks (one block, or one call per batch row); blocks of 8 in one call; two blocks per call.
    for block_size, chunk_rows in ((None, None), (8, None), (8, 16)):
        actual = banded_attention_sdpa(*qkv, window, block_size=block_size, chunk_rows=chunk_rows, **kwargs)
        assert not actual.isnan().any()
        torch.testing.assert_close(actual, expected, **TOLERANCE)


@pytest.mark.parametrize(("causal", "with_global", "padded"), list(itertools.product(BOTH, BOTH, BOTH)))
def test_sdpa_kernel_single_batch_row_and_strided_inputs(causal, with_global, padded):
    """B = 1 returns the single call's result as the output; (B, N, H, D)-strided inputs are read in place."""
    qkv, window, kwargs = make_inputs(
        150, windows="narrow", padded=padded, with_global=with_global, bias="-inf", causal=causal, seed=3
    )
    first_row = dict(kwargs)
    if padded:
        first_row["key_padding_mask"] = kwargs["key_padding_mask"][1:]  # the row with 9 padding tokens
    if with_global:
        first_row["global_index"] = torch.tensor([75])
    qkv = [t[:1].transpose(1, 2).contiguous().transpose(1, 2) for t in qkv]  # (1, H, N, D) of (1, N, H, D)
    expected = dense_banded_reference(*qkv, window, **first_row)
    for block_size, chunk_rows in ((None, None), (16, None), (16, 48)):
        blocking = dict(block_size=block_size, chunk_rows=chunk_rows)
        actual = banded_attention_sdpa(*qkv, window, **blocking, **first_row)
        torch.testing.assert_close(actual, expected, **TOLERANCE)


@pytest.mark.parametrize(("causal", "with_global", "padded"), list(itertools.product(BOTH, BOTH, BOTH)))
def test_sdpa_kernel_gradients_match_reference(causal, with_global, padded):
    """Gradients of query, key and value through SDPA's backward; distance_bias is a constant here."""
    qkv, window, kwargs = make_inputs(
        37, windows="narrow", padded=padded, with_global=with_global, bias="-inf", causal=causal, seed=1
    )
    upstream = torch.randn(BATCH, HEADS, 37, HEAD_DIM, generator=torch.Generator().manual_seed(2))

    def gradients(attention) -> list[torch.Tensor]:
        leaves = [t.clone().requires_grad_() for t in qkv]
        attention(*leaves, window, **kwargs).backward(upstream)
        return [t.grad for t in leaves]

    expected = gradients(dense_banded_reference)
    actual = gradients(lambda *args, **kw: banded_attention_sdpa(*args, block_size=8, chunk_rows=16, **kw))
    for name, got, want in zip(("query", "key", "value"), actual, expected, strict=True):
        assert not got.isnan().any(), name
        torch.testing.assert_close(got, want, **GRAD_TOLERANCE, msg=lambda m, name=name: f"{name}: {m}")


def test_sdpa_kernel_refuses_distance_bias_gradient():
    qkv, window, kwargs = make_inputs(9, bias="finite")
    distance_bias = kwargs.pop("distance_bias").requires_grad_()
    with pytest.raises(ValueError, match="no gradient to distance_bias"):
        banded_attention_sdpa(*qkv, window, distance_bias=distance_bias, **kwargs)
    with torch.no_grad():  # no gradient wanted: fine
        actual = banded_attention_sdpa(*qkv, window, distance_bias=distance_bias, **kwargs)
    expected = dense_banded_reference(*qkv, window, distance_bias=distance_bias.detach(), **kwargs)
    torch.testing.assert_close(actual, expected, **TOLERANCE)


def test_whole_sequence_window_equals_sdpa_with_padding_mask():
    qkv, _, kwargs = make_inputs(40, padded=True)
    window = torch.full((HEADS,), 40)
    mask = kwargs["key_padding_mask"]
    expected = F.scaled_dot_product_attention(*qkv, attn_mask=mask[:, None, None, :], scale=SCALING)
    for attention in (banded_attention_torch, banded_attention_sdpa, dense_banded_reference):
        actual = attention(*qkv, window, **kwargs)
        real = mask[:, None, :, None].expand_as(actual)
        torch.testing.assert_close(actual[real], expected[real], **TOLERANCE)
        assert (actual[~real] == 0).all()  # padding queries output zeros


def degenerate_inputs() -> tuple[list[torch.Tensor], torch.Tensor, dict]:
    """Rows with nothing to attend to: batch row 1 is all padding (its global token too), head 2's bias is
    -inf everywhere and head 0 has window 0 under a causal mask."""
    qkv, _, _ = make_inputs(21)
    window = torch.tensor([0, 4, 4])
    distance_bias = torch.zeros(HEADS, 5)
    distance_bias[2] = float("-inf")
    mask = torch.ones(BATCH, 21, dtype=torch.bool)
    mask[1] = False
    kwargs = dict(scaling=SCALING, causal=True, key_padding_mask=mask, distance_bias=distance_bias)
    return qkv, window, kwargs


def test_rows_with_nothing_to_attend_are_zero_not_nan():
    qkv, window, kwargs = degenerate_inputs()
    for with_global in (False, True):
        if with_global:
            kwargs = {**kwargs, "global_index": torch.tensor([20, 3])}
        expected = dense_banded_reference(*qkv, window, **kwargs)
        assert torch.isfinite(expected).all()
        assert (expected[1] == 0).all()  # all padding
        if not with_global:
            assert (expected[0, 2] == 0).all()  # only -inf scores

        leaves = [t.clone().requires_grad_() for t in qkv]
        distance_bias = kwargs["distance_bias"].clone().requires_grad_()
        kwargs_with_leaf = {**kwargs, "distance_bias": distance_bias}
        actual = banded_attention_torch(*leaves, window, block_size=8, **kwargs_with_leaf)
        torch.testing.assert_close(actual, expected, **TOLERANCE)
        actual.sum().backward()
        for tensor in [*leaves, distance_bias]:
            assert torch.isfinite(tensor.grad).all()

        leaves = [t.clone().requires_grad_() for t in qkv]
        actual = banded_attention_sdpa(*leaves, window, block_size=8, chunk_rows=8, **kwargs)
        torch.testing.assert_close(actual, expected, **TOLERANCE)
        actual.sum().backward()
        for tensor in leaves:
            assert torch.isfinite(tensor.grad).all()
        # Without autograd the global key joins each call through the kernel's log-sum-exp instead.
        with torch.no_grad():
            actual = banded_attention_sdpa(*qkv, window, block_size=8, chunk_rows=8, **kwargs)
        torch.testing.assert_close(actual, expected, **TOLERANCE)


def test_sdpa_kernel_merges_the_global_key_through_the_log_sum_exp_without_autograd(monkeypatch):
    """With inputs that need no gradient the global key column is merged by the CPU kernel's log-sum-exp;
    with the private op missing the column is appended to each key window: both give the reference."""
    from attncard.modules.kernels import banded

    for causal, padded in itertools.product(BOTH, BOTH):
        qkv, window, kwargs = make_inputs(
            150, windows="narrow", padded=padded, with_global=True, bias="-inf", causal=causal, seed=4
        )
        expected = dense_banded_reference(*qkv, window, **kwargs)
        for op in (banded._FLASH_CPU_OP, None):
            monkeypatch.setattr(banded, "_FLASH_CPU_OP", op)
            for block_size, chunk_rows in ((None, None), (16, None), (16, 48)):
                blocking = dict(block_size=block_size, chunk_rows=chunk_rows)
                actual = banded_attention_sdpa(*qkv, window, **blocking, **kwargs)
                torch.testing.assert_close(actual, expected, **TOLERANCE)


# Triton picks its interpreter when a kernel is decorated, i.e. when triton and the kernel module are first
# imported, which earlier imports of this session (torch._dynamo imports triton) may already have done. So the
# Triton kernel runs every case at once in a fresh process: interpreted on CPU, compiled on a GPU.
TRITON_SCRIPT = """
import sys
import torch
from attncard.modules.kernels.triton_banded import banded_attention_triton

device = "cuda" if torch.cuda.is_available() else "cpu"
outputs = {}
for name, (qkv, window, kwargs) in torch.load(sys.argv[1]).items():
    kwargs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    outputs[name] = banded_attention_triton(*(t.to(device) for t in qkv), window.to(device), **kwargs).cpu()
torch.save(outputs, sys.argv[2])
"""
TRITON_CASES = list(itertools.product(("wide", "narrow"), BOTH, BOTH, (None, "-inf"), BOTH))
TRITON_CASE_IDS = [
    f"{w}-{'causal' if c else 'bidir'}-{'global' if g else 'noglobal'}-bias_{b}-{'padded' if p else 'full'}"
    for w, c, g, b, p in TRITON_CASES
]
requires_triton = pytest.mark.skipif(
    not triton_available(), reason="triton is not installed (it only is on Linux x86-64)"
)


# The Triton cases' length. The kernel's default tiles are 64 on a GPU and 16 under the interpreter, whose
# time grows with query tiles times key tiles (about 1.5 s a case at 70): 40 still gives the interpreter three
# query tiles, the last one ragged, and narrow windows whose band skips key tiles on both sides.
TRITON_LENGTH = 70 if torch.cuda.is_available() else 40


def triton_cases() -> dict[str, tuple[list[torch.Tensor], torch.Tensor, dict]]:
    cases = {
        name: make_inputs(TRITON_LENGTH, windows=w, causal=c, with_global=g, bias=b, padded=p)
        for name, (w, c, g, b, p) in zip(TRITON_CASE_IDS, TRITON_CASES, strict=True)
    }
    qkv, window, kwargs = degenerate_inputs()
    cases["degenerate"] = (qkv, window, {**kwargs, "global_index": torch.tensor([20, 3])})
    return cases


@pytest.fixture(scope="module")
def triton_outputs(tmp_path_factory) -> dict[str, torch.Tensor]:
    folder = tmp_path_factory.mktemp("triton")
    torch.save(triton_cases(), folder / "cases.pt")
    env = dict(os.environ)
    if not torch.cuda.is_available():
        env["TRITON_INTERPRET"] = "1"
    result = subprocess.run(
        [sys.executable, "-c", TRITON_SCRIPT, str(folder / "cases.pt"), str(folder / "outputs.pt")],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-5000:]
    return torch.load(folder / "outputs.pt")


@requires_triton
@pytest.mark.slow  # the Triton interpreter, in a process of its own
@pytest.mark.parametrize("case", TRITON_CASE_IDS)
def test_triton_kernel_matches_reference(triton_outputs, case):
    qkv, window, kwargs = triton_cases()[case]
    actual = triton_outputs[case]
    assert not actual.isnan().any()
    torch.testing.assert_close(actual, dense_banded_reference(*qkv, window, **kwargs), **TOLERANCE)


@requires_triton
@pytest.mark.slow  # the Triton interpreter, in a process of its own
def test_triton_kernel_rows_with_nothing_to_attend(triton_outputs):
    qkv, window, kwargs = triton_cases()["degenerate"]
    expected = dense_banded_reference(*qkv, window, **kwargs)
    torch.testing.assert_close(triton_outputs["degenerate"], expected, **TOLERANCE)


@requires_triton
def test_triton_kernel_refuses_gradients():
    from attncard.modules.kernels.triton_banded import banded_attention_triton

    qkv, window, kwargs = make_inputs(9)
    qkv[0].requires_grad_()
    with pytest.raises(RuntimeError, match="no backward"):
        banded_attention_triton(*qkv, window, **kwargs)


def test_dispatch_on_cpu_picks_sdpa_unless_distance_bias_needs_grad(monkeypatch):
    # Without gradients the compiled kernel goes first where it is built (tests/modules/test_banded_cpu.py);
    # here it is not, as on a CPU without AVX2.
    monkeypatch.setattr(banded_cpu, "banded_kernel", lambda: None)
    qkv, _, kwargs = make_inputs(9, bias="finite")
    distance_bias = kwargs["distance_bias"]
    assert select_implementation(*qkv) == "sdpa"
    assert select_implementation(*qkv, distance_bias) == "sdpa"
    qkv[0].requires_grad_()
    assert select_implementation(*qkv, distance_bias) == "sdpa"  # SDPA's backward serves query, key, value
    distance_bias.requires_grad_()
    assert select_implementation(*qkv, distance_bias) == "torch"
    with torch.no_grad():
        assert select_implementation(*qkv, distance_bias) == "sdpa"


def test_dispatch_gives_distance_bias_its_gradient():
    qkv, window, kwargs = make_inputs(30, padded=True, with_global=True, bias="finite")
    distance_bias = kwargs.pop("distance_bias").requires_grad_()
    banded_attention(*qkv, window, distance_bias=distance_bias, **kwargs).sum().backward()
    expected = distance_bias.grad
    distance_bias.grad = None
    dense_banded_reference(*qkv, window, distance_bias=distance_bias, **kwargs).sum().backward()
    torch.testing.assert_close(expected, distance_bias.grad, **GRAD_TOLERANCE)


@pytest.mark.parametrize("impl", ["sdpa", "torch", "reference", "compiled"])
def test_dispatch_honours_forced_implementation(impl, monkeypatch):
    if impl == "compiled" and banded_cpu.banded_kernel() is None:
        pytest.skip("the compiled banded kernel cannot be built here")
    qkv, window, kwargs = make_inputs(30, padded=True, with_global=True, bias="-inf")
    expected = dense_banded_reference(*qkv, window, **kwargs)
    assert select_implementation(*qkv, impl=impl) == impl
    torch.testing.assert_close(banded_attention(*qkv, window, impl=impl, **kwargs), expected, **TOLERANCE)

    monkeypatch.setenv(IMPL_ENV_VAR, impl)
    assert select_implementation(*qkv) == impl
    torch.testing.assert_close(banded_attention(*qkv, window, **kwargs), expected, **TOLERANCE)


def test_dispatch_rejects_unknown_or_missing_implementation():
    qkv, _, _ = make_inputs(9)
    with pytest.raises(ValueError, match="unknown"):
        select_implementation(*qkv, impl="flash")
    if not triton_available():
        with pytest.raises(RuntimeError, match="triton"):
            select_implementation(*qkv, impl="triton")


def test_inputs_are_checked():
    qkv, window, kwargs = make_inputs(9, bias="finite")
    with pytest.raises(ValueError, match="distance_bias"):
        banded_attention_torch(*qkv, window, **{**kwargs, "distance_bias": kwargs["distance_bias"][:, :2]})
    with pytest.raises(ValueError, match="window"):
        banded_attention_torch(*qkv, window[:2], scaling=SCALING)
    with pytest.raises(ValueError, match="global_index"):
        banded_attention_torch(*qkv, window, scaling=SCALING, global_index=torch.tensor([0, 9]))
