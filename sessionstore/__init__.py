"""sessionstore: AI-agent conversations kept safe on disk.

A registry of live sessions (:class:`SessionStore`) over a storage of sessions
and their events. The public API is everything imported here; the command line
lives in :mod:`sessionstore.cli` and is not imported by ``import sessionstore``.
"""

from .codec import Codec, JsonCodec
from .errors import (
    AccessDeniedError,
    ConnectionOverloadedError,
    DatabaseBusyError,
    DatabaseCorruptError,
    DatabaseFullError,
    DatabaseReadOnlyError,
    EventEncodeError,
    InvalidCursorError,
    InvalidForkPositionError,
    InvalidSessionIdError,
    InvalidWindowError,
    MigrationError,
    NotADatabaseError,
    ParentSessionMissingError,
    SchemaError,
    SchemaOutOfDateError,
    SchemaTooNewError,
    SessionBusyError,
    SessionHeldError,
    SessionLimitError,
    StorageError,
    UnknownSessionError,
    UnsafeFileError,
)
from .events import (
    BaseEvent,
    EventTypes,
    ModelMessage,
    SystemMessage,
    Tokens,
    TokenUsage,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
)
from .registry import AgentSession, SessionConfig, SessionStore
from .sqlite import SQLiteStorage
from .storage import (
    EventContext,
    History,
    MemoryStorage,
    SessionCatalog,
    SessionPage,
    SessionRecord,
    Storage,
    StreamId,
    in_session,
)
from .stream import SessionStream

__version__ = "0.1.0"

__all__ = [
    "AgentSession",
    "BaseEvent",
    "Codec",
    "AccessDeniedError",
    "ConnectionOverloadedError",
    "DatabaseBusyError",
    "DatabaseCorruptError",
    "DatabaseFullError",
    "DatabaseReadOnlyError",
    "EventContext",
    "EventEncodeError",
    "EventTypes",
    "History",
    "InvalidCursorError",
    "InvalidForkPositionError",
    "InvalidSessionIdError",
    "InvalidWindowError",
    "JsonCodec",
    "MemoryStorage",
    "MigrationError",
    "ModelMessage",
    "NotADatabaseError",
    "ParentSessionMissingError",
    "SchemaError",
    "SchemaOutOfDateError",
    "SchemaTooNewError",
    "SessionBusyError",
    "SessionHeldError",
    "SessionCatalog",
    "SessionConfig",
    "SessionLimitError",
    "SessionPage",
    "SessionRecord",
    "SessionStore",
    "SQLiteStorage",
    "SessionStream",
    "Storage",
    "StorageError",
    "StreamId",
    "SystemMessage",
    "TokenUsage",
    "Tokens",
    "ToolCall",
    "ToolResult",
    "UnknownEvent",
    "UnknownSessionError",
    "UnsafeFileError",
    "UserMessage",
    "in_session",
]
