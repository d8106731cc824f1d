"""The record of a run: what results.json holds and how it is read and written, each file of one role:

- `results.py`: the schema (its dataclasses, versions and constants), `Results.load` / `save`, and the
  agreement of the names a record holds;
- `comparison.py`: the paired verdict's records;
- `text.py`: the text formats a field declares where it is defined, and the checks walked from them;
- `json_strict.py`: strict JSON, which every reader of a run reads alike;
- `manifest.py`: a run folder's files, their sizes and sha256, the manifest;
- `environment.py`: the environment a run records (packages, git commit);
- `run_names.py`: run tags, repository names and the command that reproduces a run;
- `frozen_schemas.py`: what the older, frozen schemas may hold;
- `citations.py`: citations more than one layer prints;
- `placeholders.py`: what the card's text may not print;
- `errors.py`: every exception attncard raises.

Standard library only: reading a results.json imports no torch (pyproject's contracts hold it).
"""
