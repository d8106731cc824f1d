"""Verifying a published run: the verified download (check, then load), `attncard verify` with the model, and
`attncard verify --predictions` without it.
"""
