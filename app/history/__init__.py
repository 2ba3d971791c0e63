"""Chat history: keeping the store in step with the open tabs (sync), converting chats to
records and back (convert), what the history view lists and its actions (files), export
formats (export) and import (import_json). Qt-free."""
