"""Markdown for the window (Qt-free): safe HTML, and streaming parts equal a one-shot render."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from desktop.core.markdown_blocks import MarkdownStream, Part, make_markdown

DOCS = [
    "# Title\n\npara one\nline two\n\n- a\n- b\n\n1. x\n\n2. y\n\n```python\nprint(1)\n```\ntail text\n",
    "Intro with `code` and **bold**.\n\n> quoted\n> more\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nEnd.",
    "```\nunclosed fence\nstill code",
    "Setext\n===\n\nanother\n---\n\n    indented code\n\nafter\n\n~~~js\nlet x = 1;\n~~~\n",
    "".join(f"Paragraph {i} has some words in it.\n\n" for i in range(80)) + "- last\n- list\n",
]


def stream_parts(text: str, cuts: list[int], freeze_chars: int) -> list[Part]:
    stream = MarkdownStream(freeze_chars=freeze_chars)
    parts: list[Part] = []
    for cut in sorted(set(cuts)):
        update = stream.update(text[:cut])
        parts = parts[: update.base] + update.parts
    update = stream.update(text, final=True)
    return parts[: update.base] + update.parts


def merged(parts: list[Part]) -> list[tuple[str, str]]:
    """Adjacent text parts joined: freezing may split a run of text, never change it."""
    out: list[tuple[str, str]] = []
    for part in parts:
        body = part.html if part.kind == "text" else f"{part.lang}:{part.source}"
        if out and part.kind == "text" and out[-1][0] == "text":
            out[-1] = ("text", out[-1][1] + body)
        else:
            out.append((part.kind, body))
    return out


@settings(max_examples=60, deadline=None)
@given(doc=st.sampled_from(DOCS), data=st.data(), freeze=st.sampled_from([1, 40, 1500]))
def test_streamed_parts_equal_the_one_shot_render(doc: str, data: st.DataObject, freeze: int) -> None:
    cuts = data.draw(st.lists(st.integers(min_value=1, max_value=len(doc)), max_size=40))
    one_shot = MarkdownStream().update(doc, final=True).parts
    assert merged(stream_parts(doc, cuts, freeze)) == merged(one_shot)


def test_every_prefix_streams_to_the_same_result() -> None:
    doc = DOCS[0] + DOCS[1]
    assert merged(stream_parts(doc, list(range(1, len(doc))), 20)) == merged(
        MarkdownStream().update(doc, final=True).parts
    )


def test_complete_blocks_freeze_so_updates_stay_small() -> None:
    doc = DOCS[4]
    stream = MarkdownStream(freeze_chars=200)
    sizes = []
    for cut in range(50, len(doc), 50):
        update = stream.update(doc[:cut])
        sizes.append(sum(len(p.source) for p in update.parts))
    assert max(sizes) < 400  # bounded by the freeze size plus one block, not by the reply


def test_code_blocks_become_their_own_parts() -> None:
    parts = MarkdownStream().update("Run:\n\n```python\nprint('hi')\n```\n\nDone.", final=True).parts
    assert [(p.kind, p.source, p.lang) for p in parts if p.kind == "code"] == [("code", "print('hi')", "python")]
    assert [p.kind for p in parts] == ["text", "code", "text"]


def test_a_closing_fence_arriving_is_not_shown_as_code() -> None:
    stream = MarkdownStream()
    assert stream.update("```\nx = 1\n``").parts[-1].source == "x = 1"


def test_model_html_is_escaped_and_images_become_links() -> None:
    html = make_markdown().render("<script>alert(1)</script> <b>b</b>\n\n![cat](http://example.com/cat.png)")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<b>" not in html
    assert "<img" not in html and '<a href="http://example.com/cat.png">[image: cat]</a>' in html


def test_dangerous_links_are_not_links() -> None:
    html = make_markdown().render("[x](javascript:alert(1)) [y](https://example.com)")
    assert 'href="javascript' not in html  # shown as text, never a link
    assert '<a href="https://example.com">y</a>' in html
