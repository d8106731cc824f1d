"""The AVX2 forms of the compiled kernels (top_k_attention.cpp, banded_attention.cpp), tested on a machine
whose tests run their AVX-512 forms.

Where torch runs AVX-512 code the kernels are built in their AVX-512 form and every test of
test_top_k_kernel.py and test_banded_cpu.py runs that one. The AVX2 form, the one older CPUs get, is built and
tested here, in one process where torch keeps to AVX2 (`ATEN_CPU_CAPABILITY=avx2`): the tests of both files
that check the kernels' results.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attncard.modules.kernels.banded_cpu import banded_kernel
from attncard.modules.kernels.top_k import top_k_kernel

TESTS = Path(__file__).parent
# The tests that compare a kernel's results (every width remainder, mask and tie), not its fallbacks.
CHOSEN = {
    "test_top_k_kernel.py": ("equals_torch_topk", "short_rows", "ties", "nan_ranks", "masks_causal", "rows"),
    "test_banded_cpu.py": ("matches_reference", "head_size", "power_of_two", "strided", "nothing_to_attend"),
}


@pytest.mark.slow  # builds both kernels a second time, in a process of its own
def test_the_avx2_forms_pass_the_kernels_tests():
    if torch.backends.cpu.get_cpu_capability() != "AVX512":
        pytest.skip("the kernels' own tests ran the AVX2 forms")
    if top_k_kernel() is None or banded_kernel() is None:
        pytest.skip("the compiled kernels cannot be built here (no AVX2, compiler or ninja)")
    files = [str(TESTS / name) for name in CHOSEN]
    chosen = " or ".join(name for names in CHOSEN.values() for name in names)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *files, "-k", chosen],
        env={**os.environ, "ATEN_CPU_CAPABILITY": "avx2"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "cannot be built" not in result.stdout, result.stdout[-2000:]
