"""sessionstore for AG2 agents (needs the ``ag2`` extra: ``pip install 'sessionstore[ag2]'``).

``import sessionstore`` never imports this package, so AG2 is loaded only by
applications that use it.
"""

from .agent import DurableACPAgent
from .codec import AG2Codec

__all__ = ["AG2Codec", "DurableACPAgent"]
