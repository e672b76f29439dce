"""The utility evaluation: datasets, metrics, the grid runner and its report."""
