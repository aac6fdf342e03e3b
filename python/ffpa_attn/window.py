"""The sliding-window rule, framework-neutral (never imports torch).

flash-attention's ``window_size = (left, right)``, the kernels' too: query row ``i`` sees
key ``j`` iff ``diag(i) - left <= j <= diag(i) + right``, an extent of -1 being unbounded
and ``(-1, -1)`` no window; ``diag(i) = i`` for the top-left alignment (SDPA's
``is_causal``) and ``i + (Nkv - Nq)`` for the bottom-right one (flash-attention's, the
varlen call's per sequence). A causal mask is the window's right extent clipped to 0.
"""

from __future__ import annotations

from .errors import UnsupportedFeatureError

__all__ = ["NO_WINDOW", "UNBOUNDED", "bound_window", "check_window", "effective_window"]

UNBOUNDED = -1
NO_WINDOW = (UNBOUNDED, UNBOUNDED)
# The custom ops take the extents as int64 (torch.library's ``int``).
_INT64_MAX = (1 << 63) - 1


def check_window(window_size: object) -> tuple[int, int]:
    """``window_size`` as ``(left, right)`` ints >= -1, or an error naming the fix."""
    ok = False
    try:
        left, right = window_size  # type: ignore[misc]
        ok = all(isinstance(x, int) and not isinstance(x, bool) for x in (left, right))
    except (TypeError, ValueError):
        pass
    if not ok or left < UNBOUNDED or right < UNBOUNDED:
        raise UnsupportedFeatureError(
            f"window_size must be a pair of ints (left, right), each >= 0 or -1 for unbounded (flash-attention's "
            f"convention: (-1, -1) is no window, (w - 1, 0) with causal a sliding window of w keys), got "
            f"{window_size!r}")
    if left > _INT64_MAX or right > _INT64_MAX:
        raise UnsupportedFeatureError(
            f"window_size={window_size!r} has an extent beyond int64 (2**63 - 1): pass -1 for an unbounded extent "
            "(any extent of at least Nq + Nkv means the same)")
    return int(left), int(right)


def bound_window(window: tuple[int, int], nq: int, nkv: int) -> tuple[int, int]:
    """``window`` with every extent of at least ``Nq + Nkv`` written -1: it bounds nothing
    then (a key index differs from any row's diagonal by less than that), and a huge
    extent would overflow the int arithmetic of the masks and the kernels' int32 fields."""
    reach = nq + nkv
    return tuple(UNBOUNDED if x >= reach else x for x in window)  # type: ignore[return-value]


def effective_window(causal: bool, window: tuple[int, int]) -> tuple[int, int]:
    """The window a causal mask leaves: the right extent clipped to 0 (flash-attention's rule)."""
    left, right = window
    if causal:
        right = 0 if right == UNBOUNDED else min(right, 0)
    return left, right
