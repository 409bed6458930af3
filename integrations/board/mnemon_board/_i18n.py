"""The board's own words in English and Chinese; plugins bring theirs in `locale/*.json`."""

# Chinese text takes full-width punctuation, and each phrase stays on one line to be read whole
# ruff: noqa: RUF001, E501

from __future__ import annotations

from typing import Final

__all__ = ["LANGUAGES", "Words", "language_of", "words"]

LANGUAGES: Final = ("en", "zh")

_EN: Final[dict[str, str]] = {
    "board": "Memory board",
    "plugins": "Plugins",
    "strategy": "Strategy",
    "options": "Options",
    "status": "Status",
    "language": "Language",
    "refresh": "Refresh",
    "on": "On",
    "off": "Off",
    "switch-on": "Switch on",
    "switch-off": "Switch off",
    "version": "Version",
    "origin": "Found",
    "entry": "Entry",
    "entries": "Entries",
    "no-entry": "Not in mnemon.toml yet; switching it on adds an entry.",
    "cannot-run": "Cannot run",
    "not-mountable": "Used by name in another entry; not switched on by itself.",
    "requires": "Requires",
    "required-by": "Required by",
    "provides": "Provides",
    "installs": "Installs",
    "mounted": "mounted",
    "not-mounted": "not mounted",
    "confirm": "Confirm",
    "cancel": "Cancel",
    "undo": "Undo",
    "apply": "Apply",
    "moves": "This switch moves:",
    "moves-only": "Only this entry moves.",
    "blocked": "It cannot be switched on: it requires {capability}, which nothing switched on provides.",
    "why-asked": "as asked",
    "why-requires": "it requires {capability}, which nothing left on provides",
    "why-conflicts": "it provides {capability} too, and one of them is exclusive",
    "selected-strategy-off": "This is the selected Strategy: with it off no View is composed until another is selected.",
    "moved": "Changed",
    "refused": "Refused: nothing changed",
    "nothing-changed": "Nothing to change.",
    "serving": "Serving generation",
    "state": "State",
    "no-generation": "No generation is serving.",
    "problem": "mnemon.toml could not be applied",
    "main-strategy": "Main Strategy",
    "strategy-hint": "The Strategy composes every View from the Sources. Only installed Strategies are listed.",
    "select": "Select",
    "selected": "selected",
    "extensions": "View extensions",
    "extensions-hint": "Small additions to the View; each applies to the Strategies that declare its slot.",
    "active": "active",
    "inactive": "inactive",
    "slot": "Slot",
    "options-hint": "Switches and selectors apply at once; typed values wait for Apply.",
    "no-options": "This plugin declares no configuration.",
    "whole-config": "Configuration (JSON)",
    "not-discovered": "Its plugin was not found by discovery: no declared configuration to draw.",
    "default": "default",
    "secret-kept": "Hidden. Leave empty to keep it; type to replace it.",
    "one-per-line": "One per line.",
    "unset": "(default)",
    "scope": "Identity",
    "scope-hint": "Source health depends on who the View is for.",
    "show": "Show",
    "healthy": "healthy",
    "unavailable": "unavailable",
    "degraded": "degraded",
    "not-selected": "not selected",
    "view": "View",
    "view-sources": "Sources in this View",
    "diagnostics": "Diagnostics",
    "no-diagnostics": "No diagnostics.",
    "no-sources": "No Source is installed.",
    "composition-failed": "No View could be composed",
    "management": "Management",
    "not-in-view": "not in this View",
    "unauthorized": "This board needs its access token: open the address `mnemon board` printed.",
    "field-errors": "Some values are not valid; nothing changed.",
    "undone": "Undone",
    "other-entries": "Other entries",
}

_ZH: Final[dict[str, str]] = {
    "board": "记忆面板",
    "plugins": "插件",
    "strategy": "策略",
    "options": "选项",
    "status": "状态",
    "language": "语言",
    "refresh": "刷新",
    "on": "开",
    "off": "关",
    "switch-on": "开启",
    "switch-off": "关闭",
    "version": "版本",
    "origin": "来源",
    "entry": "条目",
    "entries": "条目",
    "no-entry": "尚未写入 mnemon.toml；开启时会添加一个条目。",
    "cannot-run": "无法运行",
    "not-mountable": "由其他条目按名称使用，不能单独开启。",
    "requires": "依赖",
    "required-by": "被依赖于",
    "provides": "提供",
    "installs": "安装",
    "mounted": "已挂载",
    "not-mounted": "未挂载",
    "confirm": "确认",
    "cancel": "取消",
    "undo": "撤销",
    "apply": "应用",
    "moves": "此开关会改变：",
    "moves-only": "只改变这一个条目。",
    "blocked": "无法开启：它依赖 {capability}，但没有已开启的插件提供。",
    "why-asked": "按要求",
    "why-requires": "它依赖 {capability}，其余已开启的插件都不提供",
    "why-conflicts": "它也提供 {capability}，且其中一方为独占",
    "selected-strategy-off": "这是当前选定的策略：关闭后，在选定其他策略之前不会组成视图。",
    "moved": "已更改",
    "refused": "已拒绝：没有任何更改",
    "nothing-changed": "没有需要更改的内容。",
    "serving": "当前服务的版本",
    "state": "状态",
    "no-generation": "没有正在服务的版本。",
    "problem": "无法应用 mnemon.toml",
    "main-strategy": "主策略",
    "strategy-hint": "策略从各个来源组成每个视图。这里只列出已安装的策略。",
    "select": "选定",
    "selected": "已选定",
    "extensions": "视图扩展",
    "extensions-hint": "对视图的小幅补充；每个扩展作用于声明了其槽位的策略。",
    "active": "生效",
    "inactive": "未生效",
    "slot": "槽位",
    "options-hint": "开关和选择项立即生效；输入的值需点击“应用”。",
    "no-options": "此插件没有声明配置。",
    "whole-config": "配置（JSON）",
    "not-discovered": "未发现其插件：没有可绘制的已声明配置。",
    "default": "默认",
    "secret-kept": "已隐藏。留空则保持不变；输入新值以替换。",
    "one-per-line": "每行一个。",
    "unset": "（默认）",
    "scope": "身份",
    "scope-hint": "来源的健康状况取决于视图面向的身份。",
    "show": "显示",
    "healthy": "正常",
    "unavailable": "不可用",
    "degraded": "降级",
    "not-selected": "未被选用",
    "view": "视图",
    "view-sources": "此视图中的来源",
    "diagnostics": "诊断",
    "no-diagnostics": "没有诊断信息。",
    "no-sources": "没有安装任何来源。",
    "composition-failed": "无法组成视图",
    "management": "管理",
    "not-in-view": "不在此视图中",
    "unauthorized": "此面板需要访问令牌：请打开 `mnemon board` 输出的地址。",
    "field-errors": "部分值无效；没有任何更改。",
    "undone": "已撤销",
    "other-entries": "其他条目",
}

_WORDS: Final = {"en": _EN, "zh": _ZH}


class Words:
    """The board's words in one language: `words["plugins"]`, `words.format("blocked", ...)`."""

    __slots__ = ("_table", "language")

    def __init__(self, language: str) -> None:
        self.language = language if language in _WORDS else "en"
        self._table = _WORDS[self.language]

    def __getitem__(self, key: str) -> str:
        return self._table.get(key) or _EN.get(key, key)

    def format(self, key: str, **values: str) -> str:
        """The phrase `key` with its `{placeholders}` filled in."""
        return self[key].format(**values)


def words(language: str) -> Words:
    """The board's words in `language` (English for a language it does not have)."""
    return Words(language)


def language_of(chosen: str | None, accept: str | None) -> str:
    """The language to show: the one chosen, else the first of `Accept-Language` we have."""
    if chosen in LANGUAGES:
        return chosen
    for part in (accept or "").split(","):
        tag = part.split(";")[0].strip().lower()
        if tag.split("-")[0] in LANGUAGES:
            return tag.split("-")[0]
    return "en"
