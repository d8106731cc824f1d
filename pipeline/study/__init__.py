"""Studies of many runs: a sweep of a matrix and its executors (local, Ray, Slurm), the leaderboard of runs
published on the Hub, and the attention benchmark.
"""
