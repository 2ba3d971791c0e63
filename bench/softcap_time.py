"""`python -m bench.softcap_time`: one call of the final logit soft-capping (Gemma 2's cap
30) over a 256,000-token vocabulary, for 1 and 8 rows: MLX's stock ops (mx.tanh(x / cap) *
cap) against native.softcap; medians of 50 calls, the two alternated."""

import statistics
import time

import mlx.core as mx

from engine import native


def main() -> None:
    for rows in (1, 8):
        x = mx.random.normal((rows, 256000)) * 20
        mx.eval(x)
        calls = {"stock": lambda x=x: mx.eval(mx.tanh(x / 30.0) * 30.0),
                 "native": lambda x=x: mx.eval(native.softcap(x, 30.0))}
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(50):
            for name, call in calls.items():
                t = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - t)
        print(f"{rows} rows: " + ", ".join(f"{name} {statistics.median(v) * 1e3:.3f} ms"
                                           for name, v in times.items()))


if __name__ == "__main__":
    main()
