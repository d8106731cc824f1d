"""The checks of a run folder, each file of one role:

- `registry.py`: the one ordered list of checks (`CHECKS`) that download, `verify --predictions` and the Hub
  leaderboard run, each command by its profile;
- what the checks read, grouped by what they read: `integrity.py` (the files against the manifest, no
  pickle, no remote code, the run tag), `figures.py` (the record's figures against its own counts, the
  stock-load record), `module_and_adapter.py` (the module and `adapter_config.json` a download loads),
  `predictions.py` (predictions.csv), `reverification.py` (the figures recomputed from predictions.csv),
  `card_render.py` (the card, plots, `.eval_results/` and LICENSE against their rendering);
- the lint: `lint.py` (`attncard lint DIR`: a run folder, a cards folder and its leaderboard, a module's
  texts), `lint_run.py` (one run folder), `markdown.py` (the card's Markdown as the lint reads it).
"""
