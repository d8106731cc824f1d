"""The plot of `adaptive_span`'s learned spans, from its statistics as results.json holds them: drawn again
when a card is checked, so it imports no torch."""

from __future__ import annotations

from pathlib import Path


def _is_matrix(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(
            isinstance(row, list) and row and all(isinstance(x, int | float) for x in row) for row in value
        )
    )


def plot_spans(stats: dict, folder: Path) -> list[dict[str, str]]:
    """`MODULE.measurement.plots`: the learned span of every layer and head as a heat map, `spans.png`.

    Args:
        stats: the module's statistics as results.json holds them ([`module_stats`]): `spans`, a layer ×
            head matrix, and `mean_span`.
        folder: where the PNG is written.

    Returns:
        `[{"file": "spans.png", "title": ...}]`, or nothing when the stats hold no span matrix.
    """
    from matplotlib import pyplot

    spans = stats.get("spans")
    mean = stats.get("mean_span")
    if not _is_matrix(spans) or not isinstance(mean, int | float):
        return []
    figure, axis = pyplot.subplots(figsize=(1.0 + 0.5 * len(spans[0]), 1.0 + 0.45 * len(spans)))
    image = axis.imshow(spans, cmap="viridis", aspect="auto")
    axis.set_xlabel("head")
    axis.set_ylabel("layer")
    axis.set_title(f"learned span z (tokens), mean {mean:.2f}")
    figure.colorbar(image, ax=axis)
    figure.tight_layout()
    figure.savefig(folder / "spans.png", dpi=100)
    pyplot.close(figure)
    return [{"file": "spans.png", "title": "Learned span per layer and head"}]
