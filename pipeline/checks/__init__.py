"""The checks of a run folder: the ordered registry that download, `verify --predictions` and the Hub
leaderboard run, the integrity of the record against its files, predictions.csv, and the lint of a card.
"""
