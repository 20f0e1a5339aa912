"""Colours and style sheets derived from the current palette, so light and dark both work.

Nothing here hard-codes a colour: every tint is a mix of two palette roles. The window
re-applies these when the system palette changes.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QFontDatabase, QPalette

CONTENT_MAX_WIDTH = 860  # a readable line length for the conversation column
SPACING = 12


def mix(a: QColor, b: QColor, t: float) -> QColor:
    """`a` moved a fraction `t` of the way towards `b`."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * t),
        round(a.green() + (b.green() - a.green()) * t),
        round(a.blue() + (b.blue() - a.blue()) * t),
    )


def _role(palette: QPalette, role: QPalette.ColorRole) -> QColor:
    return palette.color(QPalette.ColorGroup.Active, role)


def muted_text(palette: QPalette) -> QColor:
    return mix(_role(palette, QPalette.ColorRole.WindowText), _role(palette, QPalette.ColorRole.Window), 0.45)


def subtle_fill(palette: QPalette, amount: float = 0.06) -> QColor:
    return mix(_role(palette, QPalette.ColorRole.Base), _role(palette, QPalette.ColorRole.Text), amount)


def border(palette: QPalette) -> QColor:
    return mix(_role(palette, QPalette.ColorRole.Window), _role(palette, QPalette.ColorRole.WindowText), 0.18)


def accent_fill(palette: QPalette) -> QColor:
    return mix(_role(palette, QPalette.ColorRole.Base), _role(palette, QPalette.ColorRole.Highlight), 0.16)


def warning_fill(palette: QPalette) -> QColor:
    return mix(_role(palette, QPalette.ColorRole.Base), QColor(220, 120, 0), 0.16)


def warning_border(palette: QPalette) -> QColor:
    return mix(_role(palette, QPalette.ColorRole.Base), QColor(220, 120, 0), 0.55)


def monospace_font() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


def window_stylesheet(palette: QPalette) -> str:
    """One style sheet for the window; widgets opt in by object name."""
    base = _role(palette, QPalette.ColorRole.Base).name()
    return f"""
    #ConversationColumn, #ConversationScroll, #ConversationScroll > QWidget > QWidget {{ background: {base}; }}
    #UserBubble {{ background: {accent_fill(palette).name()}; border-radius: 12px; }}
    #CodeBlock {{ background: {subtle_fill(palette).name()}; border: 1px solid {border(palette).name()};
                  border-radius: 6px; }}
    #CodeBlock QPlainTextEdit {{ background: transparent; border: none; }}
    #ThinkingHeader {{ border: none; padding: 2px 4px; color: {muted_text(palette).name()}; }}
    #ThinkingHeader:hover, #ThinkingHeader:focus {{ color: {_role(palette, QPalette.ColorRole.WindowText).name()}; }}
    #ThinkingBody {{ background: {subtle_fill(palette, 0.04).name()}; border: none;
                     color: {muted_text(palette).name()}; }}
    #TurnBanner, #NoticeBanner {{ background: {warning_fill(palette).name()};
                     border: 1px solid {warning_border(palette).name()}; border-radius: 8px; }}
    #Muted, #RoleLabel, #CodeLang {{ color: {muted_text(palette).name()}; }}
    #RoleLabel {{ font-weight: 600; }}
    #HeaderBar {{ border-bottom: 1px solid {border(palette).name()}; }}
    #ComposerBar {{ border-top: 1px solid {border(palette).name()}; }}
    #ComposerEdit {{ border: 1px solid {border(palette).name()}; border-radius: 8px; padding: 4px;
                     background: {base}; }}
    {history_stylesheet(palette)}
    """


def history_stylesheet(palette: QPalette) -> str:
    """The history sidebar, message actions and the reply-format button."""
    line = border(palette).name()
    muted = muted_text(palette).name()
    text = _role(palette, QPalette.ColorRole.WindowText).name()
    return f"""
    #SidebarTop {{ border-bottom: 1px solid {line}; }}
    #HistorySidebar {{ border-right: 1px solid {line}; }}
    #ConversationList {{ background: transparent; border: none; }}
    #HistorySearch {{ border: 1px solid {line}; border-radius: 6px; padding: 2px 6px;
                      background: {_role(palette, QPalette.ColorRole.Base).name()}; }}
    #MessageAction, #ReplyFormatButton, #HistoryMenuButton {{ border: none; padding: 2px 6px; color: {muted}; }}
    #MessageAction:hover, #MessageAction:focus, #ReplyFormatButton:hover, #ReplyFormatButton:focus,
    #HistoryMenuButton:hover, #HistoryMenuButton:focus {{ color: {text}; }}
    #ReplyFormatButton::menu-indicator, #HistoryMenuButton::menu-indicator {{ image: none; width: 0px; }}
    #UndoBar {{ background: {accent_fill(palette).name()}; border-radius: 6px; }}
    #SchemaError {{ color: {mix(QColor(text), QColor(200, 40, 0), 0.75).name()}; }}
    """


def document_css(palette: QPalette) -> str:
    """CSS for rendered Markdown (Qt's rich-text subset: margins, colours, borders)."""
    code_bg = subtle_fill(palette, 0.08).name()
    rule = border(palette).name()
    link = _role(palette, QPalette.ColorRole.Link).name()
    return f"""
    p {{ margin-top: 0px; margin-bottom: 8px; }}
    h1, h2, h3, h4, h5, h6 {{ margin-top: 6px; margin-bottom: 6px; }}
    ul, ol {{ margin-top: 0px; margin-bottom: 8px; }}
    li {{ margin-bottom: 2px; }}
    code {{ background-color: {code_bg}; font-family: monospace; }}
    blockquote {{ margin-left: 12px; color: {muted_text(palette).name()}; }}
    table {{ border-collapse: collapse; margin-bottom: 8px; }}
    th, td {{ border: 1px solid {rule}; padding: 3px 8px; }}
    a {{ color: {link}; }}
    """
