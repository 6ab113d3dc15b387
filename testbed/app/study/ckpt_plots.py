"""The checkpoint study's figures (matplotlib, Agg, imported when drawing).

* ``formats.png`` — per framework, the durable save of each format at the largest model
  as stacked phases (serialisation, copy to page cache, flush, checksum) with dd's
  durable write of the same bytes marked, and the load beside it;
* ``sizes.png`` — bytes a format adds over the training state, against model size;
* ``scaling.png`` — writers 1…N: the sharded save's speed-up and every-writer-a-copy
  aggregate rate, each with N concurrent dd;
* ``oracle.png`` — the predicted write time against GPUs (one writer vs sharded, the
  profile's and the measured serialisation) and its share of the checkpoint interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from testbed.app.study.ckpt_analysis import FRAMEWORKS, largest_rows
from testbed.app.study.ckpt_results import PHASE_LABELS, SAVE_PHASES, CheckpointStudy
from testbed.app.study.plotting import log_axis_ticks, plain_ticks, pyplot, save_png
from testbed.units import format_bytes

PHASE_COLOURS = {"serialise_s": "#D1495B", "page_cache_s": "#EDAE49", "flush_s": "#3B75AF",
                 "checksum_s": "#8E7DBE"}
FRAMEWORK_COLOURS = {"torch": "#D1495B", "tensorflow": "#EDAE49", "chainer": "#3B75AF"}


def _unit(seconds: float) -> tuple[float, str]:
    return (1e3, "ms") if seconds < 1.0 else (1.0, "s")


def formats_plot(study: CheckpointStudy, path: Path) -> None:
    plt = pyplot()
    fws = [fw for fw in FRAMEWORKS if largest_rows(study.formats, fw)]
    fig, axes = plt.subplots(len(fws), 2, figsize=(11, 1.2 + 1.0 * max(
        len(largest_rows(study.formats, fw)) for fw in fws) * len(fws) / 1.6), squeeze=False)
    for (ax, lax), fw in zip(axes, fws, strict=True):
        rows = sorted(largest_rows(study.formats, fw), key=lambda r: r.durable_s)
        top = max(max(r.durable_s, r.dd_fsync_s, r.load_min_s) for r in rows)
        scale, unit = _unit(top)
        labels = [r.format for r in rows]
        left = [0.0] * len(rows)
        for phase in SAVE_PHASES:
            widths = [scale * getattr(r, phase) for r in rows]
            ax.barh(labels, widths, left=left, color=PHASE_COLOURS[phase],
                    label=PHASE_LABELS[phase])
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.scatter([scale * r.dd_fsync_s for r in rows], labels, marker="|", s=400,
                   color="black", zorder=3, label="dd of the same bytes (fsync)")
        ax.set_xlabel(f"durable save ({unit})")
        ax.set_title(f"{fw}: {rows[0].model} ({rows[0].parameters:,} parameters, "
                     f"{format_bytes(rows[0].state_bytes)} of state)", fontsize=9)
        lax.barh(labels, [scale * r.load_min_s for r in rows], color="#4C9F70",
                 label="load (page cache warm)")
        lax.scatter([scale * r.dd_read_s for r in rows], labels, marker="|", s=400,
                    color="black", zorder=3, label="dd read")
        lax.set_xlabel(f"load ({unit})")
        lax.set_yticklabels([])
        for a in (ax, lax):
            a.grid(True, axis="x", alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="lower right")
    axes[0][1].legend(fontsize=7, loc="lower right")
    fig.suptitle("Checkpoint save and load per format, against dd of the same bytes",
                 fontsize=10)
    save_png(fig, path)


def sizes_plot(study: CheckpointStudy, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    keys = sorted({(r.framework, r.format) for r in study.formats})
    markers = "osD^v<>ph*"
    for i, (fw, fmt) in enumerate(keys):
        rows = sorted((r for r in study.formats if (r.framework, r.format) == (fw, fmt)),
                      key=lambda r: r.parameters)
        ax.plot([r.parameters for r in rows], [1.0 + r.overhead_ratio for r in rows],
                marker=markers[i % len(markers)], color=FRAMEWORK_COLOURS.get(fw, "grey"),
                alpha=0.85, label=f"{fw} {fmt}")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ratios = [1.0 + r.overhead_ratio for r in study.formats]
    log_axis_ticks(ax.get_yaxis(), min(ratios), max(ratios))
    ax.set_xlabel("model parameters")
    ax.set_ylabel("bytes on disk per byte of training state")
    ax.set_title("Bytes on disk per byte of weights + momentum (fp32)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    save_png(fig, path)


def scaling_plot(study: CheckpointStudy, path: Path) -> None:
    plt = pyplot()
    modes = [m for m in ("sharded", "all") if any(r.mode == m for r in study.scaling)]
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4), squeeze=False)
    for ax, mode in zip(axes[0], modes, strict=True):
        for fw in FRAMEWORKS:
            rows = sorted((r for r in study.scaling if r.framework == fw and r.mode == mode),
                          key=lambda r: r.writers)
            if not rows:
                continue
            n = [r.writers for r in rows]
            colour = FRAMEWORK_COLOURS[fw]
            if mode == "sharded":
                mid = [r.speedup or 0.0 for r in rows]
                low = [r.speedup_low or m for r, m in zip(rows, mid, strict=True)]
                high = [r.speedup_high or m for r, m in zip(rows, mid, strict=True)]
                ax.errorbar(n, mid, capsize=3, marker="o", color=colour,
                            label=f"{fw} (95% interval)",
                            yerr=[[m - lo for m, lo in zip(mid, low, strict=True)],
                                  [hi - m for m, hi in zip(mid, high, strict=True)]])
                ax.plot(n, [rows[0].dd_durable_s / r.dd_durable_s for r in rows], ls=":",
                        color=colour, label=f"dd ({fw} bytes)")
            else:
                ax.plot(n, [r.aggregate_GBps for r in rows], marker="o", color=colour, label=fw)
                ax.plot(n, [r.dd_GBps for r in rows], ls=":", color=colour, label=f"dd ({fw})")
        if mode == "sharded":
            top = max(r.writers for r in study.scaling)
            highs = [r.speedup_high or r.speedup or 1.0 for r in study.scaling
                     if r.mode == "sharded"]
            ceiling = 1.15 * max(2.0, *highs)
            ax.plot([1, top], [1, top], color="grey", lw=0.8, ls="--",
                    label="ideal (N×, clipped)")
            ax.set_ylim(0, ceiling)
            ax.set_ylabel("speed-up of the durable save over one writer")
            ax.set_title("Sharded: each of N writers saves 1/N", fontsize=9)
        else:
            ax.set_ylabel("aggregate durable write (GB/s)")
            ax.set_title("Every writer saves a whole copy", fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({r.writers for r in study.scaling}))
        ax.get_xaxis().set_major_formatter(plain_ticks())
        ax.set_xlabel("writer processes at once")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Writers on this machine ({study.environment.get('cpu_count', '?')} CPUs)",
                 fontsize=10)
    save_png(fig, path)


def oracle_plot(study: CheckpointStudy, path: Path) -> None:
    plt = pyplot()
    fig, (ax, sax) = plt.subplots(1, 2, figsize=(11, 4.2))
    sources = list(dict.fromkeys(r.serialise_source for r in study.oracle))
    colours = {"profile": "#333333", **FRAMEWORK_COLOURS}
    for src in sources:
        for writers, style in (("single", "-"), ("dp-shard", "--")):
            rows = sorted((r for r in study.oracle if (r.serialise_source, r.writers)
                           == (src, writers)), key=lambda r: r.gpus)
            g = [r.gpus for r in rows]
            label = f"{writers}, {'profile' if src == 'profile' else src + ' (measured)'}"
            ax.plot(g, [r.write_s for r in rows], ls=style, marker="o", ms=3,
                    color=colours.get(src, "grey"), label=label)
            sax.plot(g, [100 * r.overhead_share for r in rows], ls=style, marker="o", ms=3,
                     color=colours.get(src, "grey"), label=label)
    for a in (ax, sax):
        a.set_xscale("log", base=2)
        a.set_yscale("log")
        a.set_xlabel("GPUs (data parallel)")
        a.grid(True, which="both", alpha=0.3)
        a.get_xaxis().set_major_formatter(plain_ticks())
    writes = [r.write_s for r in study.oracle]
    shares = [100 * r.overhead_share for r in study.oracle]
    if writes:
        log_axis_ticks(ax.get_yaxis(), min(writes), max(writes))
        log_axis_ticks(sax.get_yaxis(), min(shares), max(shares))
    ax.set_ylabel("checkpoint write (s)")
    interval = study.oracle[0].interval_s if study.oracle else 0
    sax.set_ylabel(f"share of a {interval / 60:g}-min interval (%)")
    ax.legend(fontsize=7)
    system = study.oracle[0].system if study.oracle else ""
    fig.suptitle(f"Predicted checkpoint of ResNet-50 on {system} (oracle storage physics)",
                 fontsize=10)
    save_png(fig, path)


def draw_all(study: CheckpointStudy, folder: Path) -> Sequence[Path]:
    """Every figure the study has data for; the paths written."""
    out = []
    for name, draw, has in (("formats.png", formats_plot, study.formats),
                            ("sizes.png", sizes_plot, study.formats),
                            ("scaling.png", scaling_plot, study.scaling),
                            ("oracle.png", oracle_plot, study.oracle)):
        if has:
            draw(study, folder / name)
            out.append(folder / name)
    return out
