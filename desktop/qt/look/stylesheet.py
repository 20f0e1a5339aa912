"""The one Qt style sheet, built from the design tokens in `desktop/qt/look/theme.py`.

Widgets opt in by object name (`#UserBubble`, `#MessageAction`, ...) or by a dynamic
property (`[kind="primary"]`), so the sheet is the only place colours and radii are chosen.
Font sizes are in points, from the body size, so Ctrl+= / Ctrl+- scale everything together.
"""

from __future__ import annotations

from desktop.qt.look.theme import (
    RADIUS_LG,
    RADIUS_MD,
    RADIUS_SM,
    READING_LINE_HEIGHT,
    SPACE_MD,
    SPACE_SM,
    SPACE_XS,
    TYPE_SCALE,
    Palette,
    blend,
)


def _pt(body_pt: float, role: str) -> str:
    return f"{body_pt * TYPE_SCALE[role]:.1f}pt"


def document_css(p: Palette) -> str:
    """CSS for rendered Markdown (Qt's rich-text subset: margins, colours, borders)."""
    return f"""
    p {{ margin-top: 0px; margin-bottom: 10px; line-height: {READING_LINE_HEIGHT}%; }}
    li {{ line-height: {READING_LINE_HEIGHT}%; }}
    h1, h2, h3, h4, h5, h6 {{ margin-top: 10px; margin-bottom: 6px; font-weight: 600; }}
    ul, ol {{ margin-top: 0px; margin-bottom: 10px; }}
    li {{ margin-bottom: 4px; }}
    code {{ background-color: {p.surface_alt}; font-family: monospace; }}
    blockquote {{ margin-left: 12px; color: {p.muted}; }}
    table {{ border-collapse: collapse; margin-top: 2px; margin-bottom: 12px; }}
    th {{ background-color: {p.surface_alt}; color: {p.text}; font-weight: 600; }}
    td {{ background-color: {p.surface}; color: {p.text}; }}
    th, td {{ border: 1px solid {p.border}; padding: 5px 10px; }}
    a {{ color: {p.link}; text-decoration: none; }}
    """


def app_stylesheet(p: Palette, body_pt: float) -> str:
    """The whole application's sheet: window chrome, messages, banners, dialogs."""
    return "\n".join((_chrome(p, body_pt), _messages(p, body_pt), _notices(p), _controls(p, body_pt)))


def _chrome(p: Palette, body_pt: float) -> str:
    thumb, thumb_hover = blend(p.surface, p.text, 0.22), blend(p.surface, p.text, 0.38)
    return f"""
    QMainWindow, QDialog {{ background: {p.window}; }}
    #ConversationColumn, #ConversationScroll, #ConversationScroll > QWidget > QWidget {{ background: {p.surface}; }}
    /* The transcript is a Tab stop (arrows and Page keys scroll it): a ring shows it has the keys. */
    #ConversationScroll {{ border: 2px solid transparent; border-radius: {RADIUS_SM}px; }}
    #ConversationScroll:focus {{ border: 2px solid {p.accent}; }}
    #HeaderBar {{ background: {p.window}; border-bottom: 1px solid {p.border}; }}
    #HeaderTitle {{ font-size: {_pt(body_pt, "title")}; font-weight: 600; color: {p.text}; }}
    #ComposerBar, #ComposerRow {{ background: {p.surface}; }}
    #ComposerEdit {{ background: {p.surface}; border: 1px solid {blend(p.border, p.text, 0.12)};
                     border-radius: {RADIUS_LG}px; padding: {SPACE_XS}px {SPACE_SM}px; color: {p.text}; }}
    #ComposerEdit:focus {{ border: 1px solid {p.accent}; }}
    #SidebarTop {{ border-bottom: 1px solid {p.border}; }}
    #HistorySidebar {{ background: {p.window}; border-right: 1px solid {p.border}; }}
    #ConversationList {{ background: transparent; border: none; outline: 0; }}
    #ConversationList:focus {{ border: 2px solid {p.accent}; border-radius: {RADIUS_SM}px; }}
    #ConversationList::item {{ padding: {SPACE_SM}px {SPACE_SM}px; border-radius: {RADIUS_SM}px; }}
    #ConversationList::item:selected {{ background: {p.accent_soft}; color: {p.text}; }}
    #ConversationList::item:hover:!selected {{ background: {p.surface_alt}; }}
    #HistorySearch {{ border: 1px solid {p.border}; border-radius: {RADIUS_SM}px; padding: 4px 6px;
                      background: {p.surface}; color: {p.text}; }}
    #HistorySearch:focus {{ border: 1px solid {p.accent}; }}
    QStatusBar {{ background: {p.window}; color: {p.muted}; border-top: 1px solid {p.border};
                  font-size: {_pt(body_pt, "caption")}; }}
    /* QStatusBar's font does not reach its labels: they are sized as its toggle is */
    QStatusBar QLabel {{ color: {p.muted}; font-size: {_pt(body_pt, "caption")}; }}
    #ServeToggle {{ font-size: {_pt(body_pt, "caption")}; color: {p.muted}; border: 1px solid transparent;
                    border-radius: {RADIUS_SM}px; padding: 0px 6px; background: transparent; }}
    #ServeToggle:hover {{ background: {p.surface_alt}; color: {p.text}; }}
    #ServeToggle::menu-indicator {{ image: none; width: 0px; }}
    QStatusBar::item {{ border: none; }}
    QSplitter::handle {{ background: {p.border}; }}
    QSplitter::handle:horizontal {{ width: 1px; }}
    QScrollBar:vertical {{ background: transparent; width: 10px; margin: 2px; }}
    QScrollBar::handle:vertical {{ background: {thumb}; border-radius: 3px; min-height: 32px; }}
    QScrollBar::handle:vertical:hover {{ background: {thumb_hover}; }}
    QScrollBar:horizontal {{ background: transparent; height: 10px; margin: 2px; }}
    QScrollBar::handle:horizontal {{ background: {thumb}; border-radius: 3px; min-width: 32px; }}
    QScrollBar::add-line, QScrollBar::sub-line {{ width: 0; height: 0; }}
    QScrollBar::add-page, QScrollBar::sub-page {{ background: none; }}
    QTreeView, QListView {{ background: {p.surface}; alternate-background-color: {p.surface_alt};
                  border: 1px solid {p.border}; border-radius: {RADIUS_SM}px; color: {p.text}; }}
    QTreeView::item {{ padding: 4px 2px; }}
    QTreeView::item:selected {{ background: {p.accent_soft}; color: {p.text}; }}
    QHeaderView::section {{ background: {p.window}; color: {p.muted}; border: none;
                            border-bottom: 1px solid {p.border}; padding: 5px 6px; font-weight: 600; }}
    QToolTip {{ background: {p.text}; color: {p.surface}; border: none; padding: 4px 8px; border-radius: 4px; }}
    """


def _messages(p: Palette, body_pt: float) -> str:
    return f"""
    #UserBubble {{ background: {p.accent_soft}; color: {p.text}; border-radius: {RADIUS_LG}px;
                   border: 2px solid transparent; }}
    #UserBubble:focus {{ border: 2px solid {p.accent}; }}
    #UserBubble[found="true"] {{ background: {p.warning_bg}; border: 2px solid {p.warning_border}; }}
    #AnswerText {{ border: none; border-left: 2px solid transparent; font-size: {_pt(body_pt, "reading")}; }}
    #AnswerText[found="true"] {{ border-left: 2px solid {p.warning_border}; }}
    #AnswerText:focus {{ border-left: 2px solid {p.accent}; }}
    #RoleLabel {{ color: {p.muted}; font-size: {_pt(body_pt, "caption")}; font-weight: 600; }}
    #Muted, #CodeLang {{ color: {p.muted}; }}
    #CodeLang {{ font-size: {_pt(body_pt, "caption")}; }}
    #CodeBlock {{ background: {p.surface_alt}; border: 1px solid {p.border}; border-radius: {RADIUS_MD}px; }}
    #CodeHeader {{ border-bottom: 1px solid {p.border}; }}
    #CodeBlock QPlainTextEdit {{ background: transparent; border: none; color: {p.text}; }}
    #ThinkingPane {{ border: none; }}
    #ThinkingHeader {{ border: none; border-radius: {RADIUS_SM}px; padding: 3px 8px 3px 4px; color: {p.muted};
                       font-size: {_pt(body_pt, "small")}; background: transparent; }}
    #ThinkingHeader:hover {{ color: {p.text}; background: {p.surface_alt}; }}
    #ThinkingHeader:focus {{ color: {p.text}; border: 2px solid {p.accent}; padding: 1px 6px 1px 2px; }}
    #ThinkingBody {{ background: transparent; border: none; border-left: 2px solid {p.border};
                     color: {p.muted}; font-size: {_pt(body_pt, "small")}; padding-left: {SPACE_SM}px; }}
    #MessageAction, #HistoryMenuButton, #IconButton {{ border: 1px solid transparent; border-radius: {RADIUS_SM}px;
                       padding: 3px; color: {p.muted}; background: transparent; }}
    #MessageAction:hover, #HistoryMenuButton:hover, #IconButton:hover {{ background: {p.surface_alt};
                       color: {p.text}; }}
    #MessageAction:focus, #HistoryMenuButton:focus, #IconButton:focus {{ border: 2px solid {p.accent}; padding: 2px; }}
    #MessageAction:disabled, #IconButton:disabled {{ color: {blend(p.muted, p.surface, 0.5)}; }}
    #HistoryMenuButton::menu-indicator, #IconButton::menu-indicator, #ComposerOptions::menu-indicator {{
                       image: none; width: 0px; }}
    #ComposerOptions {{ border: 1px solid transparent; border-radius: {RADIUS_SM}px; padding: 4px; }}
    #ComposerOptions:hover {{ background: {p.surface_alt}; }}
    #ComposerOptions:focus {{ border: 2px solid {p.accent}; padding: 3px; }}
    #ComposerOptions[active="true"] {{ background: {p.accent_soft}; }}
    #ToolCallCard {{ background: {p.surface_alt}; border: 1px solid {p.border}; border-radius: {RADIUS_MD}px; }}
    #ToolCallCard[asking="true"] {{ background: {p.surface}; border: 1px solid {p.accent}; }}
    #ToolCallCard:focus {{ border: 2px solid {p.accent}; }}
    #ToolCallCard[asking="false"] {{ background: transparent; border: 1px solid transparent; }}
    #ToolSummary {{ border: none; border-radius: {RADIUS_SM}px; padding: 3px 8px 3px 4px; color: {p.muted};
                    font-size: {_pt(body_pt, "small")}; background: transparent; }}
    #ToolSummary:hover {{ color: {p.text}; background: {p.surface_alt}; }}
    #ToolSummary:focus {{ color: {p.text}; border: 2px solid {p.accent}; padding: 1px 6px 1px 2px; }}
    #ToolTitle {{ font-weight: 600; }}
    #ToolArguments {{ background: {p.surface}; border: 1px solid {p.border}; border-radius: {RADIUS_SM}px;
                      color: {p.text}; }}
    #ToolStatus, #ToolNotice, #WaitingIndicator {{ color: {p.muted}; }}
    #NoticeDetails {{ font-family: monospace; }}
    #SheetHeading {{ font-weight: 600; color: {p.text}; padding-top: 6px; }}
    #ShortcutKeys {{ color: {p.muted}; }}
    #EmptySidebar {{ color: {p.muted}; }}
    #ArchiveHeading {{ font-weight: 600; color: {p.text}; padding: 0px {SPACE_SM}px; }}
    #ArchiveToggle {{ text-align: left; color: {p.muted}; background: transparent; border: 1px solid transparent;
                     border-radius: {RADIUS_SM}px; padding: {SPACE_XS}px {SPACE_SM}px; }}
    #ArchiveToggle:hover {{ background: {p.surface_alt}; color: {p.text}; }}
    #ArchiveToggle:focus {{ border: 2px solid {p.accent}; padding: {SPACE_XS - 1}px {SPACE_SM - 1}px; }}
    #EmptyTitle {{ font-size: {_pt(body_pt, "display")}; font-weight: 600; color: {p.text}; }}
    #EmptyModel {{ color: {p.muted}; }}
    #ExamplePrompt {{ text-align: left; padding: {SPACE_MD}px; border: 1px solid {p.border};
                      border-radius: {RADIUS_MD}px; background: {p.surface}; color: {p.text}; }}
    #ExamplePrompt:hover {{ background: {p.surface_alt}; border: 1px solid {blend(p.border, p.text, 0.2)}; }}
    #ExamplePrompt:focus {{ border: 2px solid {p.accent}; padding: {SPACE_MD - 1}px; }}
    #ShortcutHints {{ color: {p.muted}; font-size: {_pt(body_pt, "caption")}; }}
    #ContextDivider {{ color: {p.muted}; border-top: 1px solid {p.border}; padding-top: {SPACE_XS}px;
                       font-size: {_pt(body_pt, "caption")}; }}
    """


def _notices(p: Palette) -> str:
    return f"""
    #TurnBanner {{ background: {p.warning_bg}; border: 1px solid {p.warning_border}; border-radius: {RADIUS_MD}px; }}
    #TurnBanner QLabel {{ color: {p.warning_text}; background: transparent; }}
    #NoticeBanner {{ background: {p.error_bg}; border: 1px solid {p.error_border}; border-radius: {RADIUS_MD}px;
                     margin: 8px 12px 0px 12px; }}
    #NoticeBanner QLabel {{ color: {p.error_text}; background: transparent; }}
    #NoticeBanner[calm="true"] {{ background: {p.surface_alt}; border: 1px solid {p.border}; }}
    #NoticeBanner[calm="true"] QLabel {{ color: {p.text}; }}
    #UndoBar {{ background: {p.accent_soft}; border-radius: {RADIUS_SM}px; }}
    #SchemaError {{ color: {p.error_text}; }}
    #PictureWarning {{ color: {p.warning_text}; background: {p.warning_bg}; border: 1px solid {p.warning_border};
                       border-radius: {RADIUS_SM}px; padding: 4px 8px; margin: 4px 12px 0px 12px; }}
    """


def _controls(p: Palette, body_pt: float) -> str:
    # A focused control's border is 1 px wider; its padding is 1 px narrower, so the room for
    # its text never changes with the state (Qt sizes a button for its unfocused look).
    return f"""
    QPushButton {{ border: 1px solid {p.border}; border-radius: {RADIUS_SM}px; padding: 5px 14px;
                   background: {p.surface}; color: {p.text}; }}
    QPushButton:hover {{ background: {p.surface_alt}; }}
    QPushButton:focus {{ border: 2px solid {p.accent}; padding: 4px 13px; }}
    QPushButton:disabled {{ color: {blend(p.muted, p.surface, 0.45)}; }}
    QPushButton:default, QPushButton[kind="primary"], #SendButton {{ background: {p.accent}; color: {p.accent_text};
                   border: 1px solid {p.accent}; }}
    QPushButton:default:hover, QPushButton[kind="primary"]:hover, #SendButton:hover {{
                   background: {blend(p.accent, p.text, 0.12)}; }}
    QPushButton:default:focus, QPushButton[kind="primary"]:focus, #SendButton:focus {{ border: 2px solid {p.text};
                   padding: 4px 13px; }}
    /* After the accent rules: a disabled default or primary button ("Load model" on a broken
       file, Send with nothing typed) must not be drawn as one that works. */
    QPushButton:default:disabled, QPushButton[kind="primary"]:disabled, #SendButton:disabled {{
                   background: {p.surface_alt}; color: {blend(p.muted, p.surface, 0.3)};
                   border: 1px solid {p.border}; }}
    #SendButton[busy="true"] {{ background: {p.surface}; color: {p.text}; border: 1px solid {p.border}; }}
    #ModelButton {{ border: 1px solid {p.border}; border-radius: {RADIUS_LG}px; padding: 4px 12px 4px 8px;
                    background: {p.surface}; color: {p.text}; font-weight: 600; }}
    #ModelButton:hover {{ background: {p.surface_alt}; }}
    #ModelButton:focus {{ border: 2px solid {p.accent}; padding: 3px 11px 3px 7px; }}
    #ModelButton::menu-indicator {{ image: none; width: 0px; }}
    #ReplyFormatButton {{ border: 1px solid transparent; border-radius: {RADIUS_SM}px; padding: 4px 8px;
                          color: {p.muted}; background: transparent; font-size: {_pt(body_pt, "small")}; }}
    #ReplyFormatButton:hover {{ background: {p.surface_alt}; color: {p.text}; }}
    #ReplyFormatButton:focus {{ border: 2px solid {p.accent}; color: {p.text}; padding: 3px 7px; }}
    #ReplyFormatButton::menu-indicator {{ image: none; width: 0px; }}
    #ContextMeter {{ border: 1px solid transparent; border-radius: {RADIUS_SM}px; padding: 3px 6px;
                     color: {p.muted}; background: transparent; font-size: {_pt(body_pt, "small")}; }}
    #ContextMeter:hover {{ background: {p.surface_alt}; color: {p.text}; }}
    #ContextMeter:focus {{ border: 2px solid {p.accent}; padding: 2px 5px; }}
    #ContextMeter[over="true"] {{ color: {p.error_text}; }}
    #ContextMeter::menu-indicator {{ image: none; width: 0px; }}
    #LoadingBar {{ border: none; background: {p.surface_alt}; border-radius: 2px; }}
    #LoadingBar::chunk {{ background: {p.accent}; border-radius: 2px; }}
    QLineEdit, QPlainTextEdit, QSpinBox, QDoubleSpinBox, QComboBox {{ selection-background-color: {p.accent};
                   selection-color: {p.accent_text}; }}
    QDialogButtonBox {{ dialogbuttonbox-buttons-have-icons: 0; }}
    QMenu {{ background: {p.surface}; color: {p.text}; border: 1px solid {p.border}; padding: 4px; }}
    QMenu::item {{ padding: 5px 18px 5px 12px; border-radius: 4px; }}
    QMenu::item:selected {{ background: {p.accent_soft}; }}
    QMenu::separator {{ height: 1px; background: {p.border}; margin: 4px 6px; }}
    #MenuHeading {{ color: {p.muted}; font-size: {_pt(body_pt, "small")}; font-weight: 600;
                    padding: 4px 12px 2px 12px; background: transparent; }}
    """
