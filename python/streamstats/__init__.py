"""streamstats: a Python client for the streamstats service.

Streaming quantiles, ranks, frequencies and heavy hitters over gRPC, every answer with N and its
bound. See README.md; the server is streamstatsd.
"""
from streamstats.client import *  # noqa: F401,F403
from streamstats.client import __all__  # noqa: F401

__version__ = "0.1.0"
