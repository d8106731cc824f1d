"""Publishing: train, evaluate, verify and render a run into its folder, then push it to the Hub in one signed
commit.
"""
