"""Arrow's dates, times and timestamps as ISO 8601 text, for values Python's datetime cannot
hold: nanoseconds, and years before 1 or after 9999. Each value is written as
datetime.isoformat() writes it where datetime can hold it (no fraction when it is zero, else 6
digits), with 9 fraction digits when it has nanoseconds, and the year signed and widened
(ISO 8601's expanded years: "+10000", "0000", "-0001") beyond 1 to 9999."""

from __future__ import annotations

import datetime
import re

from .record import show

NS_PER_UNIT = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
NS_PER_DAY = 86_400 * 10**9
_FIXED_OFFSET = re.compile(r"([+-])(\d\d):(\d\d)")


class UnreadableValue(Exception):
    """A value that has no ISO form here (a time zone unknown, or a local time beyond datetime's years)."""


def fraction(ns: int) -> str:
    """The sub-second part of a time: none, 6 digits, or 9 when it has nanoseconds."""
    if not ns:
        return ""
    return f".{ns // 1000:06d}" if ns % 1000 == 0 else f".{ns:09d}"


def civil_date(days: int) -> str:
    """The proleptic Gregorian date `days` after 1970-01-01, as ISO 8601 (expanded years
    beyond 0000 to 9999). Howard Hinnant's days_from_civil inverse: exact for any integer."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    shown = f"{year:04d}" if 0 <= year <= 9999 else f"+{year}" if year > 9999 else f"-{-year:04d}"
    return f"{shown}-{month:02d}-{day:02d}"


def clock(ns_of_day: int) -> str:
    hours, rest = divmod(ns_of_day, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    seconds, ns = divmod(rest, 10**9)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{fraction(ns)}"


def zone(name: str) -> datetime.tzinfo:
    """An Arrow time zone: a fixed offset (+05:30) or an IANA name (Europe/Paris)."""
    m = _FIXED_OFFSET.fullmatch(name)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        return datetime.timezone(sign * datetime.timedelta(hours=int(m.group(2)), minutes=int(m.group(3))))
    if name.upper() in ("UTC", "Z"):
        return datetime.UTC
    import zoneinfo

    try:
        return zoneinfo.ZoneInfo(name)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise UnreadableValue(f"unknown time zone {show(name)}") from None


def timestamp(value: int, unit: str, tz: datetime.tzinfo | None) -> str:
    """A timestamp of `value` units since the epoch: local time in `tz` with its offset, as
    datetime.isoformat() writes it; without a zone the wall time as stored."""
    seconds, ns = divmod(value * NS_PER_UNIT[unit], 10**9)
    if tz is None:
        days, second_of_day = divmod(seconds, 86_400)
        return f"{civil_date(days)}T{clock(second_of_day * 10**9 + ns)}"
    try:
        local = datetime.datetime.fromtimestamp(seconds, tz)
    except (OverflowError, ValueError, OSError):
        raise UnreadableValue("a time beyond the years 1 to 9999 in its time zone") from None
    shown = local.isoformat()  # (whole seconds: "YYYY-MM-DDTHH:MM:SS" then the offset)
    return shown[:19] + fraction(ns) + shown[19:]
