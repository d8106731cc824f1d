"""The leaderboard as a web page: a Gradio app, run locally or as a Hub Space, that shows a study's verified
runs (`attncard space`).

- `table`: the page's rows, from the leaderboard's groups: numbers to sort by, the leaderboard's own words.
- `source`: where the rows come from, checked: a local cards folder (each copy's figures recomputed from its
  predictions), or a Hub organisation (`attncard summary --hub`'s checks, again on a schedule, re-checking
  only what changed).
- `app`: the Gradio page over them: the answer, every group, filters, sort, search, the refused runs, a plot.
- `folder`: the Space folder (app.py, requirements.txt, README.md with its metadata), and its push.
"""
