"""Storage as the pipeline sees it: the local store and the remote tier behind one interface (tiered.py)."""
