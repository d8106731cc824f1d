"""Measures how far logits evaluated again land from the recorded ones
(`pipeline.verify.reverify.LOGIT_NOISE`): a run folder's model is loaded with `load_verified` and its
validation split evaluated under each thread count and batch size given, in this process's torch; the largest
absolute logit difference from predictions.csv and the smallest recorded margin (top logit minus the next) are
printed. Run it under another torch (a venv of its own with attncard installed) to measure that too.

    GLUE_DIR=../shared/data/glue .venv/bin/python bench/logit_noise.py runs/minilm-none-sst2 \
        --threads 1 2 --batch-sizes 1 64
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import torch

from attncard.pipeline.run.data import load_task
from attncard.pipeline.verify.download import download_verified, load_files, predict_logits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run folder with its weights (predictions.csv recorded)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--base-model", default=None, help="the base model's folder, for a local base")
    args = parser.parse_args()

    files = download_verified(args.run, allow_failed=True)
    verified = load_files(files, args.base_model)
    recorded = np.asarray(files.predictions.logits, dtype=np.float64)
    top = np.sort(recorded, axis=-1)
    margins = top[:, -1] - top[:, -2]
    data = load_task(verified.results.dataset.task, os.environ.get("GLUE_DIR"))
    print(
        f"{args.run.name}: torch {torch.__version__}, {len(recorded)} rows, logits up to "
        f"{np.abs(recorded).max():.3g}, smallest recorded margin {margins.min():.3g}"
    )
    for threads in args.threads:
        torch.set_num_threads(threads)
        for batch_size in args.batch_sizes:
            logits = predict_logits(verified, data, batch_size).double().numpy()
            flipped = int((logits.argmax(-1) != recorded.argmax(-1)).sum())
            print(
                f"  threads {threads}, batch {batch_size}: largest logit difference "
                f"{np.abs(logits - recorded).max():.3g}, rows that flip {flipped}"
            )


if __name__ == "__main__":
    main()
