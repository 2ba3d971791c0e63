"""Print the benchmark as a table, write JSON, draw PNG plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def print_table(results: dict[str, Any]) -> None:
    print(f"model {results.get('model', '?')} on {results.get('device', '?')}, sampling "
          f"{results.get('args', {}).get('sampling', 'greedy')}")
    if "physical" in results:
        p = results["physical"]
        print("\n== physical reference")
        print(f"memory bandwidth {p['memory_bandwidth_gbs']:.1f} GB/s, numpy fp32 GEMM "
              f"{p['numpy_gemm_2048_gflops']:.0f} GFLOP/s (2048^3), "
              f"{p['numpy_gemm_32x576x1536_gflops']:.0f} GFLOP/s (32x576x1536), MLX "
              f"{p['mlx_gemm_32x576x1536_gflops']:.0f} GFLOP/s (32x576x1536)")
        print(f"decode floor at batch 1: {p['decode_floor_s'] * 1e3:.1f} ms/step "
              f"({1 / p['decode_floor_s']:.1f} tok/s); large-batch ceiling "
              f"{p['ceiling_tps']:.0f} tok/s")
    if "solo" in results:
        s = results["solo"]
        print("\n== solo (one request)          engine   mlx-lm stream_generate   ratio")
        for key, label in (("decode_tps", "decode tok/s"), ("prompt_tps", "prompt tok/s")):
            print(f"{label:<28}{s['engine_' + key]:>8.1f} {s['mlx_lm_' + key]:>24.1f}"
                  f" {s[key + '_ratio']:>7.2f}x")
    if "offline" in results:
        print(f"\n== offline throughput (output tok/s), engine requests as "
              f"{results['offline'][0].get('priority', 'interactive')}")
        print("conc   engine  BatchGen   ratio | engine step ms  BatchGen step ms | overhead")
        for r in results["offline"]:
            print(f"{r['concurrency']:>4} {r['engine_output_tps']:>8.1f} "
                  f"{r['batch_generator_output_tps']:>9.1f} {r['output_tps_ratio']:>6.2f}x |"
                  f" {r['engine_step_s_median'] * 1e3:>14.0f} "
                  f"{r['batch_generator_step_s_median'] * 1e3:>17.0f} |"
                  f" {r['engine_overhead_share'] * 100:>6.1f}%")
            others = [k[: -len("_output_tps_ratio")] for k in r
                      if k.endswith("_output_tps_ratio") and k != "output_tps_ratio"
                      and not k.startswith(r.get("priority", "?"))]
            for p in others:
                print(f"     as {p}: {r[f'engine_{p}_output_tps']:.1f} tok/s, "
                      f"{r[f'{p}_output_tps_ratio']:.2f}x")
            if "batch_generator_kernels_output_tps" in r:
                print(f"     BatchGen with the engine's CPU kernels: "
                      f"{r['batch_generator_kernels_output_tps']:.1f} tok/s, engine "
                      f"{r['output_tps_ratio_vs_kernels']:.2f}x")
    if "online" in results:
        o = results["online"]
        print(f"\n== online serving: {o['requests']} requests, Poisson-like rate {o['rate']}/s "
              f"(burstiness {o['burstiness']})")
        print(f"request throughput {o['request_throughput']:.2f} req/s, output "
              f"{o['output_throughput']:.1f} tok/s, completed {o['completed']}")
        print("metric        mean   median      p99   (ms)")
        for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
            d = o[key]
            print(f"{key[:-2].upper():<8}{d['mean'] * 1e3:>9.0f}{d['median'] * 1e3:>9.0f}"
                  f"{d['p99'] * 1e3:>9.0f}")
    if "head_of_line" in results:
        h = results["head_of_line"]
        print(f"\n== head-of-line: 8 streams decoding, a {h['engine']['long_prompt_tokens']}-"
              "token prompt arrives")
        print("               ITL median  ITL p99  p99/median  long TTFT")
        for name in ("engine", "batch_generator"):
            if name in h:
                r = h[name]
                if r["itl_during_median_s"] is None:
                    print(f"{name:<15}{'(no token gap while it prefilled)':>36}"
                          f"{r['long_ttft_s']:>9.1f}s")
                    continue
                print(f"{name:<15}{r['itl_during_median_s'] * 1e3:>8.0f}ms"
                      f"{r['itl_during_p99_s'] * 1e3:>7.0f}ms{r['p99_over_median']:>10.2f}x"
                      f"{r['long_ttft_s']:>9.1f}s")
    if "multiturn" in results:
        print_multiturn(results["multiturn"])
    if "fractions" in results:
        f = results["fractions"]
        print(f"\n== achieved: solo step at {f['solo_of_floor'] * 100:.0f}% of the memory floor"
              f" speed; largest batch at {f['batch_of_ceiling'] * 100:.0f}% of the GEMM ceiling")


def print_multiturn(mt: dict[str, Any]) -> None:
    chat = mt.get("chat") or []
    if chat:
        print(f"\n== one chat, {len(chat[0]['turns'])} turns: TTFT per turn (ms); "
              "prompt tokens / from cache at the last turn")
        print(f"{'turn':<16}" + "".join(f"{i + 1:>7}" for i in range(len(chat[0]["ttft_s"])))
              + "   last/first  hit rate  prompt/cached")
        for c in chat:
            last = c["turns"][-1]
            hit = f"{c['hit_rate'] * 100:.0f}%" if c["hit_rate"] is not None else "-"
            print(f"{c['client'][:16]:<16}" + "".join(f"{t * 1e3:>7.0f}" for t in c["ttft_s"])
                  + f"   {c['last_over_first']:>9.2f}x {hit:>9}"
                  + f"  {last['prompt_tokens'] or '-'}/{last['cached_tokens'] or '-'}")
        base = chat[0]
        for c in chat[1:]:
            ratios = [a / b for a, b in zip(base["ttft_s"], c["ttft_s"], strict=False)]
            print(f"  TTFT {base['client']} / {c['client']} (below 1 = {base['client']} "
                  f"faster): worst turn {max(ratios):.2f}x, "
                  f"median {sorted(ratios)[len(ratios) // 2]:.2f}x")
    many = mt.get("chats") or []
    if many:
        m0 = many[0]
        print(f"\n== {m0['chats']} chats x {m0['turns_per_chat']} turns, {m0['think_s']} s "
              "think time")
        print(f"{'client':<16}{'tok/s':>8}{'wall s':>8}  TTFT median by turn (ms)"
              f"{'':>6}last-turn p50  hit rate")
        for m in many:
            hit = f"{m['hit_rate'] * 100:.0f}%" if m["hit_rate"] is not None else "-"
            turns = " ".join(f"{t * 1e3:>6.0f}" for t in m["ttft_median_by_turn"])
            print(f"{m['client'][:16]:<16}{m['output_tps']:>8.1f}{m['wall_s']:>8.1f}  "
                  f"{turns:<30}{m['last_turn_ttft_median']:>9.2f} s {hit:>9}")
        for m in many[1:]:
            print(f"  {m0['client']} / {m['client']}: throughput "
                  f"{m0['output_tps'] / m['output_tps']:.2f}x (above 1 = {m0['client']} "
                  f"faster), last-turn TTFT median "
                  f"{m0['last_turn_ttft_median'] / m['last_turn_ttft_median']:.2f}x "
                  f"(below 1 = {m0['client']} faster)")


def write_json(results: dict[str, Any], out: Path) -> Path:
    path = out / "bench.json"
    path.write_text(json.dumps(results, indent=2, default=float))
    return path


def plot(results: dict[str, Any], out: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    paths = []
    if results.get("offline"):
        rows = results["offline"]
        fig, ax = plt.subplots(figsize=(6, 4))
        xs = [r["concurrency"] for r in rows]
        ax.plot(xs, [r["engine_output_tps"] for r in rows], "o-", label="BatchChat engine")
        ax.plot(xs, [r["batch_generator_output_tps"] for r in rows], "s--",
                label="mlx-lm BatchGenerator")
        ax.set(xlabel="concurrent requests", ylabel="output tokens/s",
               title="Offline throughput", xscale="log", xticks=xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.grid(alpha=0.3)
        ax.legend()
        paths.append(out / "throughput.png")
        fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)
    if results.get("online", {}).get("per_request"):
        reqs = results["online"]["per_request"]
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, key, label in ((axes[0], "ttft_s", "TTFT"), (axes[1], "e2e_s", "end-to-end")):
            v = sorted(r[key] for r in reqs if r.get(key) is not None)
            if v:
                ax.step(v, [(i + 1) / len(v) for i in range(len(v))], where="post")
            ax.set(xlabel=f"{label} (s)", ylabel="fraction of requests",
                   title=f"{label} latency CDF")
            ax.grid(alpha=0.3)
        paths.append(out / "latency_cdf.png")
        fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)
    if results.get("multiturn", {}).get("chat"):
        fig, ax = plt.subplots(figsize=(6, 4))
        for c in results["multiturn"]["chat"]:
            ax.plot(range(1, len(c["ttft_s"]) + 1), c["ttft_s"], "o-", label=c["client"])
        ax.set(xlabel="turn", ylabel="time to first token (s)",
               title="One chat: TTFT per turn")
        ax.grid(alpha=0.3)
        ax.legend()
        paths.append(out / "multiturn_ttft.png")
        fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)
    return paths
