"""The `pwevent` command line."""
