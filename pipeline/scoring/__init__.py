"""Scoring a run: its metrics, the official metric of each task, the pass gate (threshold and status), the
paired comparison with the dense baseline, and how far a recomputed figure may differ from the recorded one.

Arithmetic on recorded predictions only: nothing here imports torch.
"""
