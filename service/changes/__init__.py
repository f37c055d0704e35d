"""Which operators a pull request changes, read from GitHub's list of its files and the tree at
the approved commit (a cached mirror): what `/test changed` and a trusted author's push run."""
