"""The default branch's history: each row's series over its own runs, what they say (a
regression, a drift over a window, a recovery) and the alerts that say it."""
