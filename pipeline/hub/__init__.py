"""The Hugging Face Hub: its endpoint, HTTP with one backoff policy, fetching a repository's files, and
signing and checking a run folder (OpenSSF model signing).
"""
