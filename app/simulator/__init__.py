"""The load simulator's Qt-free core: settings, prompt templates, a run, and its export."""

from .config import SimConfig, SimConfigError
from .run import LoadTarget, SimRow, SimulationRun
from .templates import PromptSet, default_prompt_set

__all__ = ["LoadTarget", "PromptSet", "SimConfig", "SimConfigError", "SimRow",
           "SimulationRun", "default_prompt_set"]
