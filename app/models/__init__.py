"""The model library: models on this disk, what each is and whether it loads, and pulls
from the Hugging Face hub (Qt-free; the UI's library dialog and `batchchat models` use it).

library.py lists them (places.py says where to look), inspect.py reads one model's
metadata without loading its weights, pull.py downloads a repo into the hub cache,
names.py gives a source its short name. Nothing is imported here, so names.py stays light.
"""
