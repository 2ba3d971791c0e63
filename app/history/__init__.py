"""Chat history, Qt-free: the store's one writer, in step with the open tabs (writer), its
delayed writes (timers), what it brings back at start (restore), its reads (reader), its
state as facts (status), the narrow entries the Workspace (its one holder) hands out
(entries); converting chats to records and back (convert), what the history
view lists and its actions (files), export formats (export) and import (import_json)."""
