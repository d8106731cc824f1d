"""Scoring a run: the tasks and their official metrics (two registries: `tasks.TASKS` and
`metrics.OFFICIAL_METRICS`), its metrics, the pass gate (threshold and status), the paired comparison with
the dense baseline, and how far a recomputed figure may differ from the recorded one.

Arithmetic on recorded predictions only: nothing here imports torch.
"""
