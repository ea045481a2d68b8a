"""Time zones by city name ("tokyo" -> Asia/Tokyo), from the IANA database (zoneinfo + tzdata)."""

from __future__ import annotations

import functools
import zoneinfo

_ALIASES = {
    "san francisco": "America/Los_Angeles", "california": "America/Los_Angeles", "seattle": "America/Los_Angeles",
    "boston": "America/New_York", "washington": "America/New_York", "miami": "America/New_York",
    "beijing": "Asia/Shanghai", "china": "Asia/Shanghai", "delhi": "Asia/Kolkata", "new delhi": "Asia/Kolkata",
    "mumbai": "Asia/Kolkata", "india": "Asia/Kolkata", "japan": "Asia/Tokyo", "france": "Europe/Paris",
    "germany": "Europe/Berlin", "england": "Europe/London", "uk": "Europe/London", "spain": "Europe/Madrid",
    "italy": "Europe/Rome", "hawaii": "Pacific/Honolulu", "utc": "UTC", "gmt": "UTC",
}


@functools.lru_cache(maxsize=1)
def _cities() -> dict[str, str]:
    cities: dict[str, str] = {}
    for key in sorted(zoneinfo.available_timezones()):
        if "/" in key and not key.startswith(("Etc/", "SystemV/", "US/")):
            cities.setdefault(key.rsplit("/", 1)[1].replace("_", " ").lower(), key)
    cities.update(_ALIASES)
    return cities


def zone_for_city(city: str) -> zoneinfo.ZoneInfo | None:
    """The time zone of a city (or a few countries) by name, or None when it is not known."""
    key = _cities().get(" ".join(city.lower().replace(".", "").split()))
    return zoneinfo.ZoneInfo(key) if key else None
