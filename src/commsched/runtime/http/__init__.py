"""The local HTTP helpers of the runtime's services (the daemon, the agent) and of their callers.

* :mod:`.localclient` — the one HTTP client for the local agent and daemon sockets, on the standard
  library only (it runs inside users' training jobs);
* :mod:`.strictjson` — strict JSON bodies and the one error shape of every service (FastAPI);
* :mod:`.serving` — a service's listener (a TCP address or a Unix socket) run under uvicorn.

Nothing is imported here: the client needs only the standard library, the other two the ``runtime``
extra.
"""
