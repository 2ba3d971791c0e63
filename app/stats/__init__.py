"""The stats panel's data: what the engine reports, sampled for the charts and table."""
