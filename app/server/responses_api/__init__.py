"""OpenAI's Responses API (`POST /v1/responses`, `GET` / `DELETE /v1/responses/{id}`) on the
one request road: a Responses body becomes a ChatRequest (request.py), the engine's events
are written as a response object (output.py) or the Responses event stream (events.py);
errors keep the server's OpenAI shape. handler.py holds the routes, openapi.py their
description; stored responses live in app/storage/stored_responses.py."""
