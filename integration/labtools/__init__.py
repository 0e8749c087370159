"""Building blocks of the integration lab (integration/lab.py). Stdlib only."""
