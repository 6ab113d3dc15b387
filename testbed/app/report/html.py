"""A self-contained HTML page: headings, figures (PNG files next to it) and tables.

No JavaScript, no external resources: the page opens from disk in any browser and
in headless Chromium (which the tests use to check that every figure loads).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

_STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:70em;
color:#222;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:1.8em;
border-bottom:1px solid #ddd;padding-bottom:.2em}
p.lead{color:#555;margin-top:0} figure{margin:1em 0} figure img{max-width:100%;
border:1px solid #eee} figcaption{color:#555;font-size:.9em}
table{border-collapse:collapse;font-size:.9em;margin:.6em 0} td,th{padding:.25em .7em;
border-bottom:1px solid #eee;text-align:right} td:first-child,th:first-child{text-align:left}
th{background:#f6f6f6} code{background:#f3f3f3;padding:0 .2em} .files a{margin-right:1em}
"""


class Page:
    """Build the page piece by piece, then :meth:`render` it."""

    def __init__(self, title: str, lead: str = "") -> None:
        self.title = title
        self.parts: list[str] = [f"<h1>{escape(title)}</h1>"]
        if lead:
            self.parts.append(f'<p class="lead">{escape(lead)}</p>')

    def heading(self, text: str) -> None:
        self.parts.append(f"<h2>{escape(text)}</h2>")

    def para(self, text: str) -> None:
        self.parts.append(f"<p>{escape(text)}</p>")

    def figure(self, src: str, caption: str, plot_id: str) -> None:
        self.parts.append(
            f'<figure><img src="{escape(src)}" alt="{escape(caption)}" '
            f'data-plot="{escape(plot_id)}"><figcaption>{escape(caption)}</figcaption></figure>')

    def table(self, headers: Sequence[str], rows: Sequence[Sequence]) -> None:
        head = "".join(f"<th>{escape(str(h))}</th>" for h in headers)
        body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>"
                       for row in rows)
        self.parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")

    def files(self, names: Sequence[str]) -> None:
        links = "".join(f'<a href="{escape(n)}">{escape(n)}</a>' for n in names)
        self.parts.append(f'<p class="files">Data: {links}</p>')

    def render(self) -> str:
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{escape(self.title)}</title><style>{_STYLE}</style></head><body>\n"
                + "\n".join(self.parts) + "\n</body></html>\n")
