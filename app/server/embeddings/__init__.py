"""POST /v1/embeddings (issue #53 part 3): the served model's pooled hidden states.

request.py reads and checks the body, pooled.py runs the padded forward over the model's
body (mlx-lm's `model.model`), forward_thread.py keeps that work off the event loop,
handler.py answers, openapi.py describes it. docs/server.md says which models and why.
"""
