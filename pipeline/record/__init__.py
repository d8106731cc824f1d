"""The record of a run: results.json's schema and how it is read and written, the hashes of a run folder's
files, the environment a run records, what the card's text may print, and the errors every layer raises.

Standard library only: reading a results.json imports no torch (pyproject's contracts hold it).
"""
