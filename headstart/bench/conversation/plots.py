"""PNG plots of `headstart bench conversation` (matplotlib, Agg backend: no display needed).

`plot_waterfall`: one row per turn (grouped by configuration), time from the true end of speech on the
x axis: end of speech -> turn.end (endpointing), -> first reply token (ASR final + LLM), -> first
reply audio byte (TTS); the first partial and the final transcript as markers.
`plot_v2v_distribution`: voice-to-voice per configuration (box plot with every turn as a dot), with
the 0.5 s target and the ~0.2 s gap people leave between turns.
"""

from __future__ import annotations

from pathlib import Path

SEGMENTS = (  # (start key or None for the end of speech, end key, label, colour)
    (None, "eou_s", "end of speech → turn.end", "#8da0cb"),
    ("eou_s", "first_token_s", "turn.end → first token", "#fc8d62"),
    ("first_token_s", "v2v_s", "first token → first audio", "#66c2a5"),
)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_waterfall(figures: dict[str, list[dict]], path: str | Path, max_rows: int = 60,
                   note: str | None = None) -> Path:
    """Write the per-turn stage waterfall to `path` (PNG); returns the path.

    Args:
        figures: configuration name -> its turn figures (headstart/bench/conversation_metrics.turn_figures).
        note: put in front of the title (e.g. "SIMULATED (virtual clock)").
    """
    plt = _pyplot()
    rows = [(name, f) for name, figs in figures.items() for f in figs][:max_rows]
    fig, ax = plt.subplots(figsize=(11, 1.8 + 0.32 * max(len(rows), 1)))
    labels = []
    for y, (name, f) in enumerate(rows):
        labels.append(f"{name} · {f['name']}")
        for start_key, end_key, label, colour in SEGMENTS:
            start = 0.0 if start_key is None else f.get(start_key)
            end = f.get(end_key)
            if start is None or end is None:
                continue
            start = max(start, 0.0)
            ax.barh(y, max(end - start, 0.0), left=start, color=colour, edgecolor="white", height=0.7,
                    label=label if y == 0 or label not in ax.get_legend_handles_labels()[1] else None)
        for key, marker, label in (("partial_s", "|", "first partial (end covered)"), ("final_s", "x", "final transcript")):
            value = f.get(key)
            if value is not None:
                ax.plot([value], [y], marker=marker, color="black", markersize=8, linestyle="none",
                        label=label if label not in ax.get_legend_handles_labels()[1] else None)
        if f.get("v2v_s") is not None:
            ax.text(f["v2v_s"] + 0.05, y, f"{f['v2v_s']:.2f} s", va="center", fontsize=7)
        else:
            ax.text(0.05, y, "no reply audio", va="center", fontsize=7, color="#d62728")
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel("seconds after the true end of the user's speech (client clock)")
    ax.set_title(_titled(note, "Where each turn's voice-to-voice time goes"))
    height = fig.get_size_inches()[1]
    if rows:
        handles, names = ax.get_legend_handles_labels()
        fig.legend(handles, names, loc="lower center", ncol=5, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.4 / height, 1, 1))
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _titled(note: str | None, title: str) -> str:
    return f"{note}: {title}" if note else title


def plot_v2v_distribution(figures: dict[str, list[dict]], path: str | Path, note: str | None = None) -> Path:
    """Write the voice-to-voice distribution per configuration to `path` (PNG); returns the path.
    `note` goes in front of the title."""
    plt = _pyplot()
    names = list(figures)
    data = [[f["v2v_s"] for f in figures[n] if f.get("v2v_s") is not None] for n in names]
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(names) + 2), 4.5))
    positions = list(range(1, len(names) + 1))
    shown = [(p, d) for p, d in zip(positions, data) if d]
    if shown:
        ax.boxplot([d for _, d in shown], positions=[p for p, _ in shown], widths=0.5, showfliers=False)
    for p, d in zip(positions, data):
        xs = [p + (i - (len(d) - 1) / 2) * 0.04 for i in range(len(d))]
        ax.plot(xs, d, "o", color="#1f77b4", alpha=0.6, markersize=4)
    ax.axhline(0.5, color="#d62728", linestyle="--", linewidth=1, label="target p50 0.5 s")
    ax.axhline(0.2, color="#2ca02c", linestyle=":", linewidth=1, label="~0.2 s human gap")
    ax.set_xticks(positions, names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("voice-to-voice (s)")
    ax.set_ylim(bottom=0)
    ax.set_title(_titled(note, "Voice-to-voice per configuration: true end of speech → first reply audio byte"),
                 fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
