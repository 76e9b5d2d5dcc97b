"""sessionstore for AG2 agents (needs the ``ag2`` extra: ``pip install -e '.[ag2]'`` in the checkout).

``import sessionstore`` never imports this package, so AG2 is loaded only by
applications that use it.
"""

import importlib.util

from ..errors import install_hint

# Said once, here, rather than as whichever of AG2's modules an import happens to reach first.
for _needed in ("ag2", "acp"):
    if importlib.util.find_spec(_needed) is None:
        raise ModuleNotFoundError(
            f"sessionstore.ag2 needs AG2 with ACP ({_needed!r} is not installed): {install_hint('ag2')}",
            name=_needed,
        )

from .agent import DurableACPAgent  # noqa: E402
from .codec import AG2Codec  # noqa: E402

__all__ = ["AG2Codec", "DurableACPAgent"]
