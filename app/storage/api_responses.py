"""The Responses API's stored responses in the app's history store (issue #53): the app's
built-in API server keeps them here, through the history's one writer, so a response
survives an app restart as `batchchat serve`'s do (app/storage/stored_responses.py holds
the table's rows and retention; this is the Store's door to them)."""

from __future__ import annotations

from typing import Any

from app.storage.base import StoreBase
from app.storage.stored_responses import Stored, delete_row, get_row, put_row


class ApiResponsesMixin(StoreBase):
    def put_api_response(self, response_id: str, items: list[dict[str, Any]],
                         response: dict[str, Any]) -> None:
        """Put one response (the old ones past the retention and the cap go with it)."""
        with self.atomic() as db:
            put_row(db, response_id, items, response)

    def get_api_response(self, response_id: str) -> Stored | None:
        """(its whole input items, the response); None: unknown, deleted or expired."""
        with self.reading() as db:
            return get_row(db, response_id)

    def delete_api_response(self, response_id: str) -> None:
        with self.atomic() as db:
            delete_row(db, response_id)
