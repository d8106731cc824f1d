"""The compiled banded kernel (modules/kernels/banded_cpu.py, banded_attention.cpp) against the dense
reference, and where the dispatcher takes it.

On a machine with AVX2, a C++ compiler and ninja (ours and CI's) the kernel must build:
`test_the_kernel_builds_where_it_can` fails rather than letting every other test here skip.
"""

from __future__ import annotations

import logging
import shutil

import pytest
import torch
from test_kernels import BOTH, CASE_IDS, CASES, TOLERANCE, degenerate_inputs, make_inputs
from torch.utils import cpp_extension

from attncard.modules.kernels import (
    banded_attention,
    banded_cpu,
    dense_banded_reference,
    select_implementation,
)
from attncard.modules.kernels.banded_cpu import KERNEL_ENV_VAR, banded_attention_cpu, banded_kernel
from attncard.modules.kernels.build import CAPABILITIES
from attncard.modules.measure import PeakMemory


@pytest.fixture
def kernel():
    if banded_kernel() is None:
        pytest.skip("the compiled banded kernel cannot be built here (no AVX2, compiler or ninja)")


def test_the_kernel_builds_where_it_can():
    buildable = (
        torch.backends.cpu.get_cpu_capability() in CAPABILITIES
        and shutil.which("c++") is not None
        and cpp_extension.is_ninja_available()
    )
    assert (banded_kernel() is not None) == buildable


@pytest.mark.parametrize("length", [1, 9, 70, 300])
@pytest.mark.parametrize("windows", ["wide", "narrow"])
@pytest.mark.parametrize(("causal", "with_global", "bias", "padded"), CASES, ids=CASE_IDS)
def test_matches_reference(kernel, length, windows, causal, with_global, bias, padded):
    qkv, window, kwargs = make_inputs(
        length, windows=windows, padded=padded, with_global=with_global, bias=bias, causal=causal
    )
    expected = dense_banded_reference(*qkv, window, **kwargs)
    actual = banded_attention_cpu(*qkv, window, **kwargs)
    assert not actual.isnan().any()
    torch.testing.assert_close(actual, expected, **TOLERANCE)


@pytest.mark.parametrize("head_dim", [1, 7, 8, 16, 24, 32, 40, 48, 64, 72, 127])
@pytest.mark.parametrize("causal", BOTH)
def test_every_head_size(kernel, head_dim, causal):
    """Columns go four registers at a time, then two, then one, then one by one (a register holds 8 floats,
    16 in the AVX-512 form): every remainder of both forms."""
    generator = torch.Generator().manual_seed(head_dim)
    qkv = [torch.randn(1, 4, 45, head_dim, generator=generator) for _ in range(3)]
    window = torch.tensor([0, 5, 17, 60])
    bias = torch.randn(4, 45, generator=generator)
    kwargs = dict(
        scaling=0.3, causal=causal, distance_bias=bias, global_index=torch.tensor([44 if causal else 0])
    )
    torch.testing.assert_close(
        banded_attention_cpu(*qkv, window, **kwargs),
        dense_banded_reference(*qkv, window, **kwargs),
        **TOLERANCE,
    )


@pytest.mark.parametrize("length", [256, 512, 1024])
def test_key_rows_a_power_of_two_apart_and_long_rows(kernel, length):
    """At N a multiple of 256 the transposed keys' rows are padded apart; the global row reads all N keys."""
    qkv, window, kwargs = make_inputs(length, windows="narrow", with_global=True, bias="finite", padded=True)
    torch.testing.assert_close(
        banded_attention_cpu(*qkv, window, **kwargs),
        dense_banded_reference(*qkv, window, **kwargs),
        **TOLERANCE,
    )


@pytest.mark.parametrize(("causal", "with_global", "padded"), [(False, True, True), (True, True, False)])
def test_strided_inputs_and_an_output_view(kernel, causal, with_global, padded):
    """q, k, v as (B, H, N, D) views of (B, N, H, D) projections, read in place; the result written into the
    transposed view of a (B, N, H, D) tensor, as adaptive_span asks."""
    qkv, window, kwargs = make_inputs(
        150, windows="narrow", padded=padded, with_global=with_global, bias="-inf", causal=causal, seed=3
    )
    expected = dense_banded_reference(*qkv, window, **kwargs)
    strided = [t.transpose(1, 2).contiguous().transpose(1, 2) for t in qkv]
    result = torch.full((qkv[0].shape[0], 150, qkv[0].shape[1], qkv[0].shape[3]), float("nan"))
    returned = banded_attention_cpu(*strided, window, **kwargs, out=result.transpose(1, 2))
    assert returned.data_ptr() == result.data_ptr()
    torch.testing.assert_close(result.transpose(1, 2), expected, **TOLERANCE)


def test_rows_with_nothing_to_attend_are_zero_not_nan(kernel):
    qkv, window, kwargs = degenerate_inputs()
    for global_index in (None, torch.tensor([20, 3])):
        case = {**kwargs, "global_index": global_index}
        expected = dense_banded_reference(*qkv, window, **case)
        actual = banded_attention_cpu(*qkv, window, **case)
        assert torch.isfinite(actual).all()
        torch.testing.assert_close(actual, expected, **TOLERANCE)


def test_a_decoders_global_token_is_its_last_real_token(kernel):
    """Causal, right padding: the global token of each row is its last real token, whose query reads every
    earlier key and whose key only itself (and padding queries, which output 0) can see."""
    qkv, window, kwargs = make_inputs(40, windows="narrow", padded=True, bias="finite", causal=True)
    kwargs["global_index"] = kwargs["key_padding_mask"].sum(-1) - 1
    torch.testing.assert_close(
        banded_attention_cpu(*qkv, window, **kwargs),
        dense_banded_reference(*qkv, window, **kwargs),
        **TOLERANCE,
    )


def test_no_n_by_n_tensor_and_scratch_that_does_not_grow_with_n(kernel):
    """N = 16384, 2 heads of 64, the output given: one N×N float32 matrix per head would be 1 GiB, and one
    head's keys transposed whole 4 MiB a thread. The kernel transposes the keys of 256 rows at a time."""
    generator = torch.Generator().manual_seed(0)
    query, key, value = (torch.randn(1, 2, 16384, 64, generator=generator) for _ in range(3))
    window = torch.tensor([8, 64])
    bias = torch.zeros(2, 65)
    out = torch.empty_like(query)
    kwargs = dict(scaling=0.125, distance_bias=bias, out=out)
    banded_attention_cpu(query, key, value, window, **kwargs)  # warm
    with PeakMemory(torch.device("cpu")) as memory:
        banded_attention_cpu(query, key, value, window, **kwargs)
    if memory.block_only:
        assert memory.peak_mb < 1.5, memory.peak_mb
    # Rows 8000 … 8199 against the reference on positions 7936 … 8263, which hold every key of their bands.
    stretch = slice(8000 - 64, 8200 + 64)
    part = dense_banded_reference(*(t[:, :, stretch] for t in (query, key, value)), window, scaling=0.125)
    torch.testing.assert_close(out[:, :, 8000:8200], part[:, :, 64:264], **TOLERANCE)


def test_shapes_are_checked(kernel):
    qkv, window, kwargs = make_inputs(9)
    with pytest.raises(ValueError, match="window must be"):
        banded_attention_cpu(*qkv, window[:2], **kwargs)
    with pytest.raises(RuntimeError, match="float32"):
        banded_kernel()(
            *(t.double() for t in qkv), window, *(torch.empty(0),) * 3, False, 1.0, qkv[0].double()
        )


# ----------------------------------------------------------------------------------------------------------
# Dispatch


def test_dispatch_takes_it_on_the_cpu_when_no_gradient_is_needed(kernel):
    qkv, window, kwargs = make_inputs(30, padded=True, with_global=True, bias="finite")
    distance_bias = kwargs["distance_bias"]
    assert select_implementation(*qkv, distance_bias) == "compiled"
    torch.testing.assert_close(
        banded_attention(*qkv, window, **kwargs), dense_banded_reference(*qkv, window, **kwargs), **TOLERANCE
    )
    assert select_implementation(*(t.half() for t in qkv)) == "sdpa"  # float32 only
    assert select_implementation(*(t.transpose(-1, -2) for t in qkv)) == "sdpa"  # rows not contiguous
    qkv[0].requires_grad_()
    assert select_implementation(*qkv, distance_bias) == "sdpa"  # no backward
    with torch.no_grad():
        assert select_implementation(*qkv, distance_bias) == "compiled"


def test_dispatch_writes_into_out_on_every_implementation(kernel):
    qkv, window, kwargs = make_inputs(30, padded=True, with_global=True, bias="-inf")
    expected = dense_banded_reference(*qkv, window, **kwargs)
    for impl in ("compiled", "sdpa", "torch", "reference"):
        out = torch.full((2, 30, 3, 16), float("nan")).transpose(1, 2)
        assert banded_attention(*qkv, window, impl=impl, out=out, **kwargs) is out
        torch.testing.assert_close(out, expected, **TOLERANCE)


def test_without_the_kernel_the_dispatcher_keeps_sdpa(monkeypatch):
    monkeypatch.setattr(banded_cpu, "banded_kernel", lambda: None)
    qkv, window, kwargs = make_inputs(9)
    assert select_implementation(*qkv) == "sdpa"
    with pytest.raises(RuntimeError, match="impl='compiled' needs the compiled banded kernel"):
        banded_attention(*qkv, window, impl="compiled", **kwargs)


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv(KERNEL_ENV_VAR, "0")
    monkeypatch.setattr(cpp_extension, "load", lambda **options: pytest.fail("switched off: no build"))
    assert banded_kernel.__wrapped__() is None


def test_a_failed_build_keeps_sdpa_with_one_warning(monkeypatch, caplog):
    def failing_load(**options):
        raise RuntimeError(
            "Error building extension 'attncard_banded'\nb.cpp:3:1: error: no compiler today\n"
        )

    monkeypatch.delenv(KERNEL_ENV_VAR, raising=False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    monkeypatch.setattr(cpp_extension, "load", failing_load)
    with caplog.at_level(logging.WARNING):
        assert banded_kernel.__wrapped__() is None
    (record,) = caplog.records
    assert "b.cpp:3:1: error: no compiler" in record.getMessage()
    assert "SDPA-based banded kernel" in record.getMessage() and "\n" not in record.getMessage()
