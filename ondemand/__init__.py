"""What every part of the product shares: the `ondemand` command line and the retry policy."""
