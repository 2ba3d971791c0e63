"""Anthropic's Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`) on the one
request road: an Anthropic body becomes a ChatRequest (request.py), the engine's events are
written in Anthropic's shapes (message.py whole, events.py streamed), errors in Anthropic's
error shape (errors.py). handler.py holds the two routes; openapi.py their description.
Other API dialects get a folder of their own beside this one."""
