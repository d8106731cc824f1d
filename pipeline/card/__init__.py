"""What is rendered: the model card and its licence from a run's results, its plots, and the leaderboard of a
folder of runs. Nothing here imports torch.
"""
