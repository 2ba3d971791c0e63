"""Several models at once (issue #50): one engine per loaded model, loaded on demand by name,
kept within a memory budget (idle least-recently-used ones evicted, a TTL per model, pins).
Qt-free; the API server (`batchchat serve --models-dir`) holds one."""

from .budget import HeldOutside, default_budget_bytes, need_of
from .catalog import Catalog
from .errors import NoRoom, UnknownModel
from .manager import Lease, ModelInfo, ModelManager, ModelState

__all__ = ["Catalog", "HeldOutside", "Lease", "ModelInfo", "ModelManager", "ModelState",
           "NoRoom", "UnknownModel", "default_budget_bytes", "need_of"]
