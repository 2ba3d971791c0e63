"""Which phase of a tick holds MLX's highest peak (issue #46 item 14), for the measuring
tools (`engine_memory --phases`, `memory_session --phases`): `install()` wraps the engine's
phases (schedule, the runner's passes, the rows' step, the finished rows' leave, the
join); for each, MLX's arrays live as it began, its peak and what was live after it
(nothing is evaluated early, so a lazy copy counts where it runs), and the cached
prefixes' and batch buffers' bytes before and after it. `report()` prints the tick with
the highest phase peak since the last report, with what the batch's buffers held as it
began (rows made against rows in use, columns against lengths)."""

from __future__ import annotations

from typing import Any

MIB = 1 << 20

# name: (live before, peak, live after, (prefixes, buffers) before, the same after)
Phase = tuple[int, int, int, tuple[int, int], tuple[int, int]]


def held(core: Any) -> tuple[int, int]:
    """(cached prefixes' bytes, the decode batch's buffers' bytes) now."""
    if core is None:
        return 0, 0
    prefix = core.memory.prefix
    return (prefix.nbytes if prefix is not None else 0), core.batch.nbytes


def buffers(core: Any) -> str:
    """The decode batch's buffers in words: bytes, rows held of rows made, columns made
    against the rows' lengths, and what the rows still running have set aside."""
    cache = core.batch.cache
    if cache is None:
        return "no batch buffers"
    layer = cache[0]
    lengths = getattr(layer, "lengths", None)
    keys = getattr(layer, "keys", None)
    if lengths is None or keys is None or keys.ndim != 4:
        return f"batch buffers {core.batch.nbytes // MIB} MiB"
    running = sum(s.kv_reserved for s in core.batch.seqs if not s.is_finished)
    done = sum(s.is_finished for s in core.batch.seqs)
    return (f"batch buffers {core.batch.nbytes // MIB} MiB: {len(lengths)} of {keys.shape[0]}"
            f" rows ({done} finished), {keys.shape[2]} columns for lengths "
            f"{min(lengths, default=0)}-{max(lengths, default=0)}, running rows' set-asides "
            f"{running // MIB} MiB")


class TickPhases:
    """The probe: `install()` once before the engine runs, `report()` after each round."""

    def __init__(self) -> None:
        self.phases: dict[str, Phase] = {}  # this tick's
        self.core: Any = None  # the engine's core (the runner's phases find it here)
        self.worst: tuple[int, dict[str, Phase], str] | None = None  # highest since report

    def install(self) -> None:
        import mlx.core as mx

        from engine import engine_core, model_runner

        probe = self

        def timed(cls: type, name: str) -> None:
            fn = getattr(cls, name)

            def probed(obj: Any, *a: Any, **k: Any) -> Any:
                core = obj if hasattr(obj, "memory") else probe.core
                live, before = mx.get_active_memory(), held(core)
                mx.reset_peak_memory()
                try:
                    return fn(obj, *a, **k)
                finally:
                    # (the peak since the reset: 0 when the phase made nothing)
                    probe.phases[name.strip("_")] = (
                        live, max(live, mx.get_peak_memory()), mx.get_active_memory(),
                        before, held(core))
                    mx.reset_peak_memory()
            setattr(cls, name, probed)

        for cls, name in ((engine_core.EngineCore, "_schedule"),
                          (model_runner.ModelRunner, "execute"),
                          (model_runner.ModelRunner, "step_rows"),
                          (engine_core.EngineCore, "_drop_finished_rows"),
                          (engine_core.EngineCore, "_join_prefilled")):
            timed(cls, name)
        step = engine_core.EngineCore.step

        def stepped(core: Any, *a: Any, **k: Any) -> Any:
            probe.core = core
            probe.phases.clear()
            began = buffers(core)  # the batch buffers as the tick began
            out = step(core, *a, **k)
            top = max((v[1] for v in probe.phases.values()), default=0)
            if probe.worst is None or top > probe.worst[0]:
                prefix = core.memory.prefix
                probe.worst = (top, dict(probe.phases), (
                    f"{began}; {len(core.batch.seqs)} rows after, "
                    f"{len(core.scheduler.prefilling)} prefilling, KV set aside "
                    f"{core.memory.reserved // MIB} MiB, prefixes "
                    f"{prefix.nbytes // MIB if prefix is not None else 0}"))
            return out

        engine_core.EngineCore.step = stepped

    def report(self) -> None:
        if self.worst is None:
            return
        peak, by_phase, rows = self.worst
        print(f"  tick of the highest phase peak: {peak // MIB} MiB ({rows}): " + "; ".join(
            f"{name} {a // MIB} -> peak {b // MIB} -> {c // MIB} (prefixes, buffers "
            f"{h0[0] // MIB}, {h0[1] // MIB} -> {h1[0] // MIB}, {h1[1] // MIB})"
            for name, (a, b, c, h0, h1) in by_phase.items()), flush=True)
        self.worst = None
