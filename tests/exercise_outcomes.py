"""Assertions for the exercise checks' tests: an answer's outcome in English and in Chinese."""

import re

LANGS = ("en", "zh")
HAN = re.compile(r"[\u4e00-\u9fff]")


def assert_right(q, *answers):
    for lang in LANGS:
        status, message = q.outcome(*answers, lang=lang)
        assert status == "right", message


def assert_todo(q, *answers):
    for lang in LANGS:
        status, message = q.outcome(*answers, lang=lang)
        assert status == "todo", message


def assert_wrong(q, answers, en_hint, zh_hint):
    """Not right yet, with the hint of this mistake, in English and in Chinese."""
    for lang, hint in zip(LANGS, (en_hint, zh_hint), strict=True):
        status, message = q.outcome(*answers, lang=lang)
        assert status == "wrong", message
        assert hint in message, message
        assert lang == "en" or HAN.search(message), message
