"""The HTTP surface besides the webhook: the runner API and the pages people read."""
