"""GitHub as the service speaks to it: the one client (`client.py`: App or token, its rate
limits, outages and missing permissions), the hourly budget GitHub states (`budget.py`), what
the App needs of GitHub (`permissions.py`) and which installations lack it
(`installations.py`). Every stage that reads or writes GitHub uses this package."""
