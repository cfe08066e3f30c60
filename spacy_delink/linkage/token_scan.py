"""The compiled passes that turn a text's code points into tokens (``linkage.tokenize``):
one per reading (SPEC §1–2 exact, §8 search), and the marking of masked characters.

The index build runs them over hundreds of millions of characters: in Python, or as
several numpy passes with temporaries, they are 5–40x slower.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from .characters import _BREAK, _HANGUL, _MARK, _ORDINARY, _WORD

_NEWLINE, _SPACE, _TAB, _CR = 10, 32, 9, 13


@nb.njit(cache=True, nogil=True)
def _mark_ranges(flags: np.ndarray, ranges: np.ndarray) -> None:
    """Set ``flags`` to 1 over each half-open range (a masked text has hundreds)."""
    for i in range(len(ranges)):
        flags[ranges[i, 0] : ranges[i, 1]] = 1


@nb.njit(cache=True, nogil=True)
def _token_buffers(capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Room for ``capacity`` tokens: starts, ends, segment starts, spaceless flags (both scans fill them)."""
    return (
        np.empty(capacity, dtype=np.int64),
        np.empty(capacity, dtype=np.int64),
        np.empty(capacity, dtype=np.bool_),
        np.empty(capacity, dtype=np.bool_),
    )


@nb.njit(cache=True, nogil=True, inline="always")
def _word_run_end(codes: np.ndarray, classes: np.ndarray, masked: np.ndarray, kinds: np.ndarray, i: int) -> int:
    """Where a run of unmasked word characters of ordinary scripts that reaches ``i`` ends."""
    size = len(codes)
    while i < size and classes[codes[i]] == _WORD and masked[i] == 0 and kinds[codes[i]] == _ORDINARY:
        i += 1
    return i


@nb.njit(cache=True, nogil=True)
def _scan_codes(
    codes: np.ndarray, classes: np.ndarray, masked: np.ndarray, single: np.ndarray, paragraph_breaks: bool, kinds: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Token starts, ends, segment starts and character flags of a text's code points (SPEC §1–2).

    ``classes`` maps a code point to ``_OTHER``, ``_WORD`` or ``_BREAK``; ``masked`` marks
    the characters inside masks; ``single`` lists the code points that do not break when
    they are a whole gap alone. A gap breaks when it holds a break character, a masked
    character, or (with ``paragraph_breaks``) a newline, then only spaces, tabs or
    carriage returns, then a newline — unless it is exactly one unmasked ``single``. A
    letter of a script written without spaces (``kinds``) is a token of its own with the
    combining marks after it, and a run of other word characters ends where one starts,
    with no gap before the next piece (docs/languages.md).
    """
    size = len(codes)
    starts, ends, segment_start, spaceless = _token_buffers(size + 1)  # every character can be a token of its own
    count = 0
    gap_breaks = True
    i = 0
    while i < size:  # a gap, then the token after it: two tight loops, not one branching per character
        gap_length = 0
        gap_code = np.uint32(0)
        gap_masked = False
        newline_open = False
        while i < size:
            code = codes[i]
            is_masked = masked[i] != 0
            kind = classes[code]
            if kind == _WORD and not is_masked:
                break
            gap_length += 1
            gap_code = code
            if is_masked:
                gap_breaks = True
                gap_masked = True
            elif kind == _BREAK:
                gap_breaks = True
            if paragraph_breaks:
                if code == _NEWLINE:
                    if newline_open:
                        gap_breaks = True
                    newline_open = True
                elif code != _SPACE and code != _TAB and code != _CR:
                    newline_open = False
            i += 1
        if i == size:
            break
        breaks = gap_breaks or count == 0
        if count and gap_length == 1 and not gap_masked:
            for allowed in single:
                if gap_code == allowed:
                    breaks = False
        segment_start[count] = breaks
        starts[count] = i
        kind = kinds[codes[i]]
        spaceless[count] = kind != _ORDINARY
        i += 1
        if kind == _ORDINARY:
            i = _word_run_end(codes, classes, masked, kinds, i)
        else:
            while i < size and masked[i] == 0 and kinds[codes[i]] == _MARK:
                i += 1
        ends[count] = i
        count += 1
        gap_breaks = False
    return starts[:count], ends[:count], segment_start[:count], spaceless[:count]  # views: the pages past ``count`` are never touched


@nb.njit(cache=True, nogil=True)
def _scan_search(
    codes: np.ndarray, origin: np.ndarray, text_codes: np.ndarray, classes: np.ndarray, masked: np.ndarray, kinds: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The search reading's tokens of a text's search form (SPEC §8): starts, ends, segment
    starts and whether each is a character of a script written without spaces.

    ``classes`` tells word characters; ``kinds`` (``_spaceless_kinds``) splits them: a
    character of a script written without spaces is a token alone (the characters that one
    Hangul syllable of ``text_codes`` folded to, ``origin``, are one token: its jamo, some
    read as Han or Katakana look-alikes), and a run of other word
    characters ends where such a character starts, with no gap before the next piece. Only
    a mask breaks a gap: punctuation and paragraph ends join, as in an engine's field.
    """
    size = len(codes)
    starts, ends, segment_start, spaceless = _token_buffers(size)
    count = 0
    gap_breaks = True
    i = 0
    while i < size:
        if classes[codes[i]] != _WORD or masked[i] != 0:
            if masked[i] != 0:
                gap_breaks = True
            i += 1
            continue
        kind = _HANGUL if kinds[text_codes[origin[i]]] == _HANGUL else kinds[codes[i]]
        segment_start[count] = gap_breaks
        starts[count] = i
        spaceless[count] = kind != _ORDINARY
        i += 1
        if kind == _ORDINARY:
            i = _word_run_end(codes, classes, masked, kinds, i)
        elif kind == _HANGUL:  # whatever letters the syllable's jamo fold to (look-alikes: Han, Katakana)
            while i < size and origin[i] == origin[i - 1] and classes[codes[i]] == _WORD and masked[i] == 0:
                i += 1
        ends[count] = i
        count += 1
        gap_breaks = False
    return starts[:count], ends[:count], segment_start[:count], spaceless[:count]
