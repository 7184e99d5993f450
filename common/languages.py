"""Languages as users give them (ISO 639-1 or 639-2 codes, English or native names, any case, region tags) turned
into the one ISO 639-1 code every part of the package works with. A leaf module: it imports nothing of the package."""
from __future__ import annotations

import re

# ISO 639-1 code -> English name: the languages our prompts, head sets and recognisers are set up for.
LANGUAGES = {
    "en": "English", "de": "German", "it": "Italian", "zh": "Chinese", "cs": "Czech", "fr": "French",
    "es": "Spanish", "pt": "Portuguese", "nl": "Dutch", "ja": "Japanese", "ru": "Russian", "pl": "Polish",
}

# Other spellings users and harnesses pass: ISO 639-2/B and /T codes and native names.
_ALIASES = {
    "en": ("eng", "english"), "de": ("deu", "ger", "deutsch"), "it": ("ita", "italiano"),
    "zh": ("zho", "chi", "chinese", "mandarin", "中文", "汉语", "普通话"), "cs": ("ces", "cze", "čeština", "cestina"),
    "fr": ("fra", "fre", "français", "francais"), "es": ("spa", "español", "espanol"), "pt": ("por", "português"),
    "nl": ("nld", "dut", "nederlands"), "ja": ("jpn", "日本語"), "ru": ("rus", "русский"), "pl": ("pol", "polski"),
}

_LOOKUP = {
    **{code: code for code in LANGUAGES},
    **{name.lower(): code for code, name in LANGUAGES.items()},
    **{alias: code for code, aliases in _ALIASES.items() for alias in aliases},
}


class LanguageError(ValueError):
    """A language that is not one of LANGUAGES under any accepted spelling."""


def supported_languages() -> str:
    """'en (English), de (German), ...': the list every refusal names."""
    return ", ".join(f"{code} ({name})" for code, name in LANGUAGES.items())


def language_code(language: str) -> str:
    """The ISO 639-1 code of `language`: 'German', 'german', 'DE', 'de-AT', 'deu' -> 'de'; 'Chinese', 'zh_CN' -> 'zh'.

    Raises LanguageError naming the supported languages for anything else (including an empty value).
    """
    if not isinstance(language, str) or not language.strip():
        raise LanguageError(f"no language given ({language!r}); supported: {supported_languages()}")
    text = language.strip().lower()
    for candidate in (text, re.split(r"[-_\s(]", text, maxsplit=1)[0]):  # 'zh-CN', 'en_US', 'Chinese (Mandarin)'
        if candidate in _LOOKUP:
            return _LOOKUP[candidate]
    raise LanguageError(f"unknown language {language!r}; supported (ISO code or English name, any case): "
                        f"{supported_languages()}")


def language_name(language: str) -> str:
    """The English name of `language` (any accepted spelling): 'de' or 'german' -> 'German'."""
    return LANGUAGES[language_code(language)]
