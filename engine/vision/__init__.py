"""Images in chats (issue #52): vision-language models through mlx-vlm.

A VLM directory (config.json with a `vision_config`) loads through mlx-vlm's own model class
and processor (`load.py`). The engine's model is the VLM's language model as mlx-lm's own
class over the very same weight arrays, so every text path of the engine (ragged passes,
native kernels, prefix cache, compiled decode) runs it unchanged; the vision tower and the
merge of its features into the prompt's embeddings are mlx-vlm's (`prompt.py`). An image
request's prompt ids carry ids derived from each image's digest at its image tokens
(`keys.py`), so the prefix cache tells two images apart.

Importing this package loads no MLX (`engine/public.py` reads `keys.py`'s names).
"""
