"""Unit conversion with pint: "convert 5 miles to kilometers", "how many ounces in a pound"."""

from __future__ import annotations

import functools

from headstart.tools.numbers import spoken_number

_ALIASES = {"celsius": "degC", "centigrade": "degC", "fahrenheit": "degF", "kelvin": "kelvin",
            "degrees celsius": "degC", "degrees fahrenheit": "degF", "kilometres": "kilometers",
            "metres": "meters", "litres": "liters", "kph": "km/h", "mph": "mile/hour"}


class UnitError(ValueError):
    """A unit pint does not know, or two units that do not convert."""


@functools.lru_cache(maxsize=1)
def _registry():
    import pint

    return pint.UnitRegistry()


def unit_name(text: str) -> str:
    """A spoken unit as pint reads it ("degrees fahrenheit" -> "degF").

    Raises:
        UnitError: pint does not know it.
    """
    key = text.lower().strip()
    unit = _ALIASES.get(key, key.replace(" ", "_"))
    try:
        _registry().Unit(unit)
    except Exception as exc:
        raise UnitError(f"unknown unit {text!r}") from exc
    return unit


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """`value` in `from_unit`, in `to_unit`.

    Raises:
        UnitError: an unknown unit, or units of different dimensions.
    """
    ureg = _registry()
    try:
        quantity = ureg.Quantity(value, unit_name(from_unit))
        return float(quantity.to(unit_name(to_unit)).magnitude)
    except UnitError:
        raise
    except Exception as exc:
        raise UnitError(f"cannot convert {from_unit} to {to_unit}") from exc


def spoken_quantity(value: float, unit: str) -> str:
    """"3.1 miles" (rounded to 3 significant decimals)."""
    rounded = round(value, 2) if abs(value) >= 1 else float(f"{value:.3g}")
    return f"{spoken_number(rounded)} {unit}"
