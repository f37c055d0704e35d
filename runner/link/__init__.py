"""The runner's link to the service: the runner API's client and the runner's identity
(`runner.json`, registering). The first stage: everything after it may talk to the service."""
