"""adaptive_sparse's compiled top-k attention (modules/kernels/top_k.py, top_k_attention.cpp).

Each test of the kernel runs it against `torch.topk` and the full-matrix computation; the fallback tests make
the build fail or switch it off. On a machine with AVX2, a C++ compiler and ninja (ours and CI's) the kernel
must build: `test_the_kernel_builds_where_it_can` fails rather than letting every other test here skip.
"""

from __future__ import annotations

import logging
import shutil

import pytest
import torch
from torch.utils import cpp_extension

from attncard.modules.adaptive_sparse import AdaptiveSparseState, adaptive_sparse_attention
from attncard.modules.adaptive_sparse import attention as sparse_attention
from attncard.modules.kernels import top_k as top_k_module
from attncard.modules.kernels.top_k import KERNEL_ENV_VAR, top_k_kernel, top_k_rows_kernel
from attncard.modules.measure import PeakMemory

NO_MASK = torch.empty(0, dtype=torch.bool)


@pytest.fixture
def kernel():
    compiled = top_k_kernel()
    if compiled is None:
        pytest.skip("the compiled top-k kernel cannot be built here (no AVX2, compiler or ninja)")
    return compiled


def _attention(top_k: int, causal: bool) -> torch.nn.Module:
    module = torch.nn.Module()
    module.is_causal = causal
    module.adaptive_sparse = AdaptiveSparseState(top_k)
    return module.eval()


def _expected(query, key, value, allowed, k, scaling):
    """`torch.topk` over the full (B, H, Nq, Nk) scores with -inf where not allowed; softmax; P·V."""
    scores = (query @ key.transpose(-2, -1)) * scaling
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    kept, indices = scores.topk(k, dim=-1)
    keep = kept != float("-inf")
    weights = kept.masked_fill(~keep, torch.finfo(kept.dtype).min).softmax(-1).masked_fill(~keep, 0.0)
    rows = torch.gather(
        value[:, :, None].expand(-1, -1, query.shape[2], -1, -1),
        3,
        indices[..., None].expand(-1, -1, -1, -1, value.shape[-1]),
    )
    return kept, indices, (weights[..., None] * rows).sum(-2)


def _run(kernel, query, key, value, mask=NO_MASK, causal=False, scaling=0.3, k=8):
    out = torch.full_like(query, float("nan"))
    kept, indices = kernel(query, key, value, mask, causal, scaling, k, True, out)
    return kept, indices, out


def test_the_kernel_builds_where_it_can():
    buildable = (
        torch.backends.cpu.get_cpu_capability() in top_k_module.CAPABILITIES
        and shutil.which("c++") is not None
        and cpp_extension.is_ninja_available()
    )
    assert (top_k_kernel() is not None) == buildable


@pytest.mark.parametrize("n", [16, 37, 128, 300, 512, 1100])
@pytest.mark.parametrize("k", [1, 8, 16])
def test_equals_torch_topk_at_every_length(kernel, n, k):
    # 16–511 keys take the bound of two registers, from 512 on four; k = 16 is the largest the bound takes.
    generator = torch.Generator().manual_seed(n * 100 + k)
    query, key, value = (torch.randn(2, 3, n, 24, generator=generator) for _ in range(3))
    kept, indices, out = _run(kernel, query, key, value, k=k)
    expected_kept, expected_indices, expected_out = _expected(query, key, value, None, k, 0.3)
    torch.testing.assert_close(kept, expected_kept, atol=1e-5, rtol=1e-5)
    assert torch.equal(indices, expected_indices)
    torch.testing.assert_close(out, expected_out, atol=1e-5, rtol=1e-5)


def test_short_rows_odd_head_sizes_and_query_blocks(kernel):
    # 9 keys (the sort path), D = 7 (no whole vector), 13 query rows (blocks of 6 and a tail of 1).
    generator = torch.Generator().manual_seed(1)
    query = torch.randn(2, 2, 13, 7, generator=generator)
    key, value = (torch.randn(2, 2, 9, 7, generator=generator) for _ in range(2))
    for k in (1, 5, 9):
        _, indices, out = _run(kernel, query, key, value, k=k)
        _, expected_indices, expected_out = _expected(query, key, value, None, k, 0.3)
        assert torch.equal(indices, expected_indices)
        torch.testing.assert_close(out, expected_out, atol=1e-5, rtol=1e-5)


def test_ties_go_to_the_lower_key_and_many_ties_take_the_sort(kernel):
    # Scores of two values only: 64 and more tie at the bound, beyond what the ranking takes.
    query = torch.ones(1, 1, 3, 4)
    key = torch.zeros(1, 1, 200, 4)
    key[0, 0, ::3] = 1.0  # every third key scores higher: 67 of them
    value = torch.randn(1, 1, 200, 4)
    kept, indices, out = _run(kernel, query, key, value, scaling=1.0, k=8)
    assert (kept == 4.0).all() and indices[0, 0].tolist() == [list(range(0, 24, 3))] * 3
    torch.testing.assert_close(out[0, 0], value[0, 0, 0:24:3].mean(0).expand(3, 4))
    # A few ties among the candidates of the bound: the lower key first.
    key = torch.randn(1, 1, 64, 4, generator=torch.Generator().manual_seed(2))
    key[0, 0, 40] = key[0, 0, 10] = 5.0  # score 20, far above the others
    _, indices, _ = _run(kernel, query, key, value[:, :, :64], scaling=1.0, k=2)
    assert indices[0, 0, 0].tolist() == [10, 40]
    # 22 tied at the top: more candidates than one register holds (the ranking of the general form).
    key[0, 0, 3:63:3] = 5.0
    _, indices, _ = _run(kernel, query, key, value[:, :, :64], scaling=1.0, k=8)
    assert indices[0, 0, 0].tolist() == sorted({*range(3, 63, 3), 10, 40})[:8]


def test_nan_ranks_first_as_in_torch_topk(kernel):
    generator = torch.Generator().manual_seed(3)
    query = torch.randn(1, 1, 4, 8, generator=generator)
    key = torch.randn(1, 1, 64, 8, generator=generator)
    value = torch.randn(1, 1, 64, 8, generator=generator)
    key[0, 0, 17] = float("nan")
    kept, indices, out = _run(kernel, query, key, value, k=4)
    assert (indices[..., 0] == 17).all() and kept[..., 0].isnan().all()
    assert torch.equal(indices[..., 1:], (query @ key.transpose(-2, -1)).topk(4).indices[..., 1:])
    assert out.isnan().all()  # as the softmax over a NaN gives


@pytest.mark.parametrize("n", [40, 130, 520])
def test_masks_causal_rows_and_rows_with_few_or_no_keys(kernel, n):
    generator = torch.Generator().manual_seed(n)
    query, key, value = (torch.randn(3, 2, n, 16, generator=generator) for _ in range(3))
    lengths = torch.tensor([n, 5, 0])  # whole, fewer keys than k, none
    padding = torch.arange(n)[None, :] < lengths[:, None]
    mask = padding[:, None, None, :].expand(3, 1, n, n)  # an expanded view, as sdpa_mask gives
    causal_mask = torch.ones(n, n, dtype=torch.bool).tril()
    for given, causal, allowed in [
        (mask, False, mask),
        (NO_MASK, True, causal_mask[None, None]),
        (mask & causal_mask, False, mask & causal_mask),
    ]:
        kept, indices, out = _run(kernel, query, key, value, mask=given, causal=causal, k=8)
        expected_kept, _, expected_out = _expected(query, key, value, allowed, 8, 0.3)
        torch.testing.assert_close(kept, expected_kept, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out, expected_out, atol=1e-5, rtol=1e-5)
        assert (indices >= 0).all() and (indices < n).all()
        assert (out[2] == 0).all() if given is not NO_MASK else True  # no allowed key: output 0


def test_writes_strided_outputs_and_reads_strided_inputs(kernel):
    # The layouts a model passes: q, k, v slices of one fused projection (B, N, 3·H·D), output (B, N, H, D).
    generator = torch.Generator().manual_seed(4)
    fused = torch.randn(2, 70, 3 * 4 * 16, generator=generator)
    query, key, value = (part.view(2, 70, 4, 16).transpose(1, 2) for part in fused.split(64, dim=-1))
    output = torch.zeros(2, 70, 4, 16)
    kernel(query, key, value, NO_MASK, False, 0.25, 8, False, output.transpose(1, 2))
    _, _, expected = _expected(query, key, value, None, 8, 0.25)
    torch.testing.assert_close(output, expected.transpose(1, 2), atol=1e-5, rtol=1e-5)


def test_refuses_what_it_does_not_take(kernel):
    query = torch.randn(1, 1, 8, 4)
    out = torch.empty_like(query)
    with pytest.raises(RuntimeError, match="float32"):
        kernel(query.double(), query.double(), query.double(), NO_MASK, False, 1.0, 2, False, out.double())
    with pytest.raises(RuntimeError, match="k must be"):
        kernel(query, query, query, NO_MASK, False, 1.0, 9, False, out)
    with pytest.raises(RuntimeError, match="mask must be"):
        kernel(query, query, query, torch.ones(1, 1, 8, 8), False, 1.0, 2, False, out)


# ----------------------------------------------------------------------------------------------------------
# adaptive_sparse_attention: when it takes the kernel, and that it gives what the tiles give


@pytest.mark.parametrize("causal, padded", [(False, False), (False, True), (True, False), (True, True)])
def test_attention_takes_the_kernel_at_inference_with_the_tiles_result(kernel, causal, padded, monkeypatch):
    generator = torch.Generator().manual_seed(5)
    query = torch.randn(2, 4, 45, 8, generator=generator)
    key, value = (torch.randn(2, 2, 45, 8, generator=generator) for _ in range(2))  # GQA: 2 key heads
    mask = None
    if padded:
        padding = torch.arange(45)[None, :] < torch.tensor([45, 30])[:, None]
        mask = padding[:, None, None, :].expand(2, 1, 45, 45)
        if causal:
            mask = mask & torch.ones(45, 45, dtype=torch.bool).tril()
    calls = []
    compiled_call = sparse_attention._compiled_call
    monkeypatch.setattr(
        sparse_attention, "_compiled_call", lambda *args: calls.append(1) or compiled_call(*args)
    )
    with torch.inference_mode():
        output, probabilities = adaptive_sparse_attention(
            _attention(5, causal), query, key, value, mask, scaling=0.35, output_attentions=True
        )
    assert calls == [1]
    monkeypatch.setattr(sparse_attention, "top_k_kernel", lambda: None)
    with torch.inference_mode():
        expected, expected_probabilities = adaptive_sparse_attention(
            _attention(5, causal), query, key, value, mask, scaling=0.35, output_attentions=True
        )
    assert calls == [1]
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(probabilities, expected_probabilities, atol=1e-5, rtol=1e-5)


def test_attention_reads_a_one_row_mask_for_every_query(kernel, monkeypatch):
    generator = torch.Generator().manual_seed(6)
    query, key, value = (torch.randn(2, 2, 30, 8, generator=generator) for _ in range(3))
    one_row = (torch.arange(30)[None, :] < torch.tensor([30, 12])[:, None])[:, None, None, :]  # (B, 1, 1, N)
    with torch.inference_mode():
        output, _ = adaptive_sparse_attention(_attention(4, False), query, key, value, one_row, scaling=0.35)
    _, _, expected = _expected(query, key, value, one_row, 4, 0.35)
    torch.testing.assert_close(output, expected.transpose(1, 2), atol=1e-5, rtol=1e-5)


def test_attention_keeps_the_tiles_where_the_kernel_does_not_apply(kernel, monkeypatch):
    calls = []
    monkeypatch.setattr(sparse_attention, "_compiled_call", lambda *args: calls.append(1))
    query = torch.randn(1, 2, 20, 8)
    float_mask = torch.zeros(1, 1, 20, 20)
    cases = [
        ("autograd", _attention(4, False), query.clone().requires_grad_(), None),
        ("k beyond the kernel's", _attention(17, False), query, None),
        ("half precision", _attention(4, False), query.half(), None),
        ("an additive float mask", _attention(4, False), query, float_mask),
    ]
    for _, module, q, mask in cases:
        adaptive_sparse_attention(module, q, q.detach(), q.detach(), mask, scaling=0.35)
    with torch.no_grad():
        training = _attention(4, False).train()
        adaptive_sparse_attention(training, query, query, query, None, scaling=0.35, dropout=0.1)
    assert calls == []


def test_the_kernel_builds_no_n_by_n_tensor(kernel):
    """N = 2048, 2 heads: one N×N float32 matrix per head would be 16 MiB."""
    n, heads, dim = 2048, 2, 16
    query, key, value = (torch.randn(1, heads, n, dim) for _ in range(3))
    module = _attention(8, False)
    with torch.no_grad():
        adaptive_sparse_attention(module, query, key, value, None, scaling=dim**-0.5)  # warm-up
        with PeakMemory(torch.device("cpu")) as memory:
            output, _ = adaptive_sparse_attention(module, query, key, value, None, scaling=dim**-0.5)
    if memory.block_only:  # the output (256 KiB), a head's keys transposed and 36 rows of scores per thread
        assert memory.peak_mb < 2, memory.peak_mb
    _, _, expected = _expected(query, key, value, None, 8, dim**-0.5)
    torch.testing.assert_close(output, expected.transpose(1, 2), atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------------------------------------
# Where it cannot be built


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv(KERNEL_ENV_VAR, "0")
    assert top_k_kernel.__wrapped__() is None


def test_a_failed_build_leaves_torch_topk_with_one_warning(monkeypatch, caplog):
    def failing_load(**options):
        raise RuntimeError("Error building extension 'attncard_top_k'\nx.cpp:1:1: error: no compiler today\n")

    monkeypatch.delenv(KERNEL_ENV_VAR, raising=False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    monkeypatch.setattr(cpp_extension, "load", failing_load)
    with caplog.at_level(logging.WARNING, logger=top_k_module.__name__):
        assert top_k_kernel.__wrapped__() is None
    (record,) = caplog.records
    assert "x.cpp:1:1: error: no compiler today" in record.getMessage()
    assert "torch.topk" in record.getMessage() and "\n" not in record.getMessage()


def test_an_older_cpu_is_not_tried(monkeypatch):
    monkeypatch.delenv(KERNEL_ENV_VAR, raising=False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    monkeypatch.setattr(cpp_extension, "load", lambda **options: pytest.fail("no build without AVX2"))
    assert top_k_kernel.__wrapped__() is None


# ----------------------------------------------------------------------------------------------------------
# The selection alone, over scores autograd already holds (training)


@pytest.mark.parametrize("shape", [(5, 3), (7, 16), (3, 4, 37), (1536, 128), (50, 513)])
@pytest.mark.parametrize("k", [1, 3, 8, 16])
def test_top_k_rows_is_torch_topk(kernel, shape, k):
    if k > shape[-1]:
        pytest.skip("k beyond the row")
    scores = torch.randn(*shape, generator=torch.Generator().manual_seed(k))
    values, indices = top_k_rows_kernel()(scores, k)
    expected = scores.topk(k)
    assert torch.equal(values, expected.values) and torch.equal(indices, expected.indices)


def test_top_k_rows_masked_rows_ties_and_nan(kernel):
    scores = torch.randn(4, 64, generator=torch.Generator().manual_seed(1))
    scores[:, 10:] = float("-inf")  # 10 allowed keys, k = 16: six -inf picks, the lowest masked keys
    scores[1] = float("-inf")  # nothing allowed
    scores[2, 3] = float("nan")  # ranks first, as in torch.topk
    scores[3, :10] = -1.0  # ties: the lower keys first
    scores[3, :4] = 0.5
    values, indices = top_k_rows_kernel()(scores, 16)
    torch.testing.assert_close(values, scores.topk(16).values, equal_nan=True)
    assert indices[0, 10:].tolist() == list(range(10, 16))
    assert indices[2, 0] == 3 and indices[3].tolist() == list(range(16))
    assert (indices[1] == torch.arange(16)).all()


def test_training_selects_with_the_kernel_and_gets_torch_topks_gradients(kernel, monkeypatch):
    """One padded training call (dropout off) with the compiled selection and with `torch.topk`: the same
    output and gradients."""
    generator = torch.Generator().manual_seed(2)
    leaves = [torch.randn(2, 3, 40, 16, generator=generator, requires_grad=True) for _ in range(3)]
    allowed = torch.ones(2, 1, 40, 40, dtype=torch.bool)
    allowed[1, ..., 30:] = False
    module = _attention(8, False).train()
    calls = []
    compiled = top_k_rows_kernel()
    monkeypatch.setattr(sparse_attention, "top_k_rows_kernel", lambda: calls.append(1) or compiled)
    output, _ = adaptive_sparse_attention(module, *leaves, allowed, scaling=0.25)
    output.sum().backward()
    gradients = [leaf.grad.clone() for leaf in leaves]
    assert calls, "the training call did not use the compiled selection"
    for leaf in leaves:
        leaf.grad = None
    monkeypatch.setattr(sparse_attention, "top_k_rows_kernel", lambda: None)
    expected, _ = adaptive_sparse_attention(module, *leaves, allowed, scaling=0.25)
    expected.sum().backward()
    torch.testing.assert_close(output, expected)
    for leaf, gradient in zip(leaves, gradients, strict=True):
        torch.testing.assert_close(gradient, leaf.grad)
