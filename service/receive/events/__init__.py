"""One handler per webhook event kind the service acts on; `service/receive/handle.py`
dispatches a recorded delivery to the one for its event."""
