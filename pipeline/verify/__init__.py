"""Verifying a published run: the verified download (check, then load: `download.py`, with the base model it
loads in `base_model.py`), `attncard verify` with the model (`reverify.py`), and `attncard verify
--predictions` without it (`reverify_predictions.py`).
"""
