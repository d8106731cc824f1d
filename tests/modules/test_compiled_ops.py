"""The compiled kernels' operators, `torch.ops.attncard.*` (modules/kernels/build.py): defined in Python with
fake implementations, so that torch's own checks of a custom operator pass (`torch.library.opcheck`: its
schema, autograd registration, fake tensors and AOT dispatch), `torch.compile` traces a function that calls
them, and a second build of a kernel loaded into the process replaces its CPU implementation rather than
aborting the process.

The kernels are built on first use (about 20 s each, once per machine: torch's extension cache); every test
here skips where they cannot be built, which test_top_k_kernel.py and test_banded_cpu.py fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from attncard.modules.kernels import banded_attention, dense_banded_reference
from attncard.modules.kernels.banded_cpu import banded_kernel
from attncard.modules.kernels.top_k import top_k_kernel

B, H, N, D = 2, 3, 40, 16
NO_FLOAT, NO_BOOL, NO_LONG = (
    torch.empty(0),
    torch.empty(0, dtype=torch.bool),
    torch.empty(0, dtype=torch.long),
)


@pytest.fixture(scope="module")
def kernels():
    if top_k_kernel() is None or banded_kernel() is None:
        pytest.skip("the compiled kernels cannot be built here (no AVX2, compiler or ninja)")


def _qkv(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, N, D, generator=generator) for _ in range(3))


def _heads_last_out() -> torch.Tensor:
    return torch.empty(B, N, H, D).transpose(1, 2)


def _cases() -> dict[str, tuple[str, tuple]]:
    """Each operator as models call it: masks or none, causal or not, `out` a transposed (B, N, H, D) view."""
    query, key, value = _qkv()
    padding = torch.ones(B, N, dtype=torch.bool)
    padding[1, 30:] = False
    mask = padding[:, None, None, :].expand(B, 1, N, N)
    window = torch.tensor([3, 7, 50])
    generator = torch.Generator().manual_seed(1)
    bias = torch.randn(H, 51, generator=generator)
    return {
        "top_k_rows": ("top_k_rows", (torch.randn(B, H, 128, generator=generator), 8)),
        "top_k_attention": (
            "top_k_attention",
            (query, key, value, NO_BOOL, False, 0.25, 8, True, torch.empty_like(query)),
        ),
        "top_k_attention masked, results not kept": (
            "top_k_attention",
            (query, key, value, mask.contiguous(), False, 0.25, 8, False, _heads_last_out()),
        ),
        "top_k_attention causal": (
            "top_k_attention",
            (query, key, value, NO_BOOL, True, 0.25, 4, True, _heads_last_out()),
        ),
        "banded_attention": (
            "banded_attention",
            (query, key, value, window, NO_FLOAT, NO_BOOL, NO_LONG, False, 0.25, torch.empty_like(query)),
        ),
        "banded_attention bias, padding, global token": (
            "banded_attention",
            (query, key, value, window, bias, padding, torch.tensor([0, 0]), False, 0.25, _heads_last_out()),
        ),
        "banded_attention causal": (
            "banded_attention",
            (query, key, value, window, bias, padding, torch.tensor([39, 29]), True, 0.25, _heads_last_out()),
        ),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_each_operator_passes_opcheck(kernels, case):
    name, args = _cases()[case]
    torch.library.opcheck(getattr(torch.ops.attncard, name), args)  # raises on the first check that fails


def _both_operators(query, key, value):
    """The banded kernel's output, then the top-k kernel on it: a graph in which each op writes its `out`."""
    banded = torch.empty_like(query)
    window = torch.tensor([3, 7, 50])
    torch.ops.attncard.banded_attention(
        query * 2, key, value, window, NO_FLOAT, NO_BOOL, NO_LONG, False, 0.25, banded
    )
    out = torch.empty_like(query)
    kept, indices = torch.ops.attncard.top_k_attention(banded, key, value, NO_BOOL, False, 0.25, 4, True, out)
    return out + 1, kept, indices


def test_torch_compile_traces_the_operators_in_one_graph(kernels):
    torch._dynamo.reset()
    compiled = torch.compile(_both_operators, backend="aot_eager", fullgraph=True)  # no graph break
    for got, expected in zip(compiled(*_qkv()), _both_operators(*_qkv()), strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
def test_torch_compile_runs_the_banded_dispatcher(kernels):
    window = torch.tensor([3, 7, 50])

    def attend(query, key, value):
        return banded_attention(query, key, value, window, scaling=0.25) * 2

    torch._dynamo.reset()
    got = torch.compile(attend, backend="aot_eager")(*_qkv())  # graph breaks where the kernel is looked up
    expected = dense_banded_reference(*_qkv(), window, scaling=0.25) * 2
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_a_second_build_loaded_replaces_the_kernels_and_the_process_lives(kernels, tmp_path):
    # Two copies of each library, as two builds of a kernel (another name, another cache) would be; each
    # registers the same operators' CPU kernels. The modules are imported twice: their definitions are kept.
    libraries = sorted(
        path
        for path in torch.ops.loaded_libraries
        if Path(path).name.startswith(("attncard_top_k", "attncard_banded"))
    )
    assert len(libraries) >= 2, torch.ops.loaded_libraries
    copies = [shutil.copy(path, tmp_path / f"second_{index}.so") for index, path in enumerate(libraries)]
    script = textwrap.dedent(
        f"""
        import importlib
        import torch
        from attncard.modules.kernels import banded_cpu, top_k
        for library in {[*libraries, *map(str, copies)]!r}:
            torch.ops.load_library(library)
        importlib.reload(top_k)
        importlib.reload(banded_cpu)
        scores = torch.randn(6, 128)
        assert torch.equal(torch.ops.attncard.top_k_rows(scores, 8)[0], scores.topk(8).values)
        query = torch.randn(1, 2, 40, 16)
        window = torch.tensor([3, 7])
        out = torch.empty_like(query)
        torch.ops.attncard.banded_attention(query, query, query, window, torch.empty(0),
            torch.empty(0, dtype=torch.bool), torch.empty(0, dtype=torch.long), False, 0.25, out)
        expected = banded_cpu.dense_banded_reference(query, query, query, window, scaling=0.25)
        assert torch.allclose(out, expected, atol=1e-5)
        print("alive")
        """
    )
    # A loaded machine imports torch and the kernels slowly; the limit only stops a hang.
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and result.stdout.strip() == "alive", result.stderr[-3000:]
