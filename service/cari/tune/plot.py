"""`cari tune ef-search --plot FILE.svg`: recall@k against p50 latency, one point per ef_search.

Written by hand: a line, its points and their labels are ~50 lines of SVG, where a plotting
library would add tens of megabytes to every install for one picture.
"""

from __future__ import annotations

from html import escape

from cari.schema.tune import EfSearchTuning

WIDTH, HEIGHT = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 30, 40, 60  # margins around the plot area


def svg(result: EfSearchTuning) -> str:
    """The curve as an SVG document: latency (ms, p50) across, recall up; the target as a
    dashed line, the recommended point ringed, exact-scan points hollow."""
    points = result.points
    slowest = max(p.p50_ms for p in points) * 1.1 or 1.0
    lowest = min(min(p.recall for p in points), result.target) - 0.02
    floor = max(0.0, min(lowest, 0.95))

    def x(ms: float) -> float:
        return LEFT + ms / slowest * (WIDTH - LEFT - RIGHT)

    def y(recall: float) -> float:
        return TOP + (1 - (recall - floor) / (1 - floor)) * (HEIGHT - TOP - BOTTOM)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="22" font-size="14">{escape(result.collection)}: '
        f"recall@{result.k} against p50 latency, per ef_search ({result.questions} "
        f"{'sampled chunks' if result.questions_from == 'sample' else 'questions'})</text>",
        f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" '
        'stroke="black"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="black"/>',
        f'<text x="{(WIDTH + LEFT) / 2}" y="{HEIGHT - 15}" text-anchor="middle">'
        "p50 latency of a vector search, ms</text>",
        f'<text x="18" y="{(HEIGHT + TOP - BOTTOM) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 18 {(HEIGHT + TOP - BOTTOM) / 2})">recall@{result.k}</text>',
    ]
    for tick in range(5):  # axis labels at fifths of each range
        ms, recall = slowest * tick / 4, floor + (1 - floor) * tick / 4
        parts.append(
            f'<text x="{x(ms):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{ms:.1f}</text>'
        )
        parts.append(
            f'<text x="{LEFT - 6}" y="{y(recall) + 4:.1f}" text-anchor="end">{recall:.3f}</text>'
        )
    parts.append(
        f'<line x1="{LEFT}" y1="{y(result.target):.1f}" x2="{WIDTH - RIGHT}" '
        f'y2="{y(result.target):.1f}" stroke="grey" stroke-dasharray="4 4"/>'
    )
    line = " ".join(f"{x(p.p50_ms):.1f},{y(p.recall):.1f}" for p in points)
    parts.append(f'<polyline points="{line}" fill="none" stroke="steelblue" stroke-width="2"/>')
    for p in points:
        cx, cy = x(p.p50_ms), y(p.recall)
        fill = "steelblue" if p.index_used else "white"
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{fill}" stroke="steelblue"/>'
        )
        parts.append(f'<text x="{cx + 6:.1f}" y="{cy - 6:.1f}">{p.ef_search}</text>')
        if p.ef_search == result.recommended:
            parts.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="9" fill="none" stroke="darkorange" '
                'stroke-width="2"/>'
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
