"""A sweep's search space: ``choice``, ``uniform``, ``loguniform`` and ``randint`` parameters, each with its grid
(``points`` values for the continuous ones), a random draw, and a plain-dict form that the sweep's stored state
keeps (so another kernel rebuilds the same space)."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Value = Any  # a parameter's value: what a job's parameters hold (numbers, strings, booleans)


@dataclass(frozen=True)
class Choice:
    values: tuple[Value, ...]

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("choice needs at least one value")

    def grid(self, points: int) -> list[Value]:
        return list(self.values)

    def sample(self, rng: random.Random) -> Value:
        return rng.choice(self.values)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "choice", "values": list(self.values)}


@dataclass(frozen=True)
class Uniform:
    low: float
    high: float
    log: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low <= self.high):
            raise ValueError(f"uniform needs finite low <= high, got {self.low}, {self.high}")
        if self.log and self.low <= 0:
            raise ValueError(f"loguniform needs 0 < low, got {self.low}")

    def grid(self, points: int) -> list[float]:
        if points <= 1 or self.low == self.high:
            return [self._from_unit(0.5)]
        return list(dict.fromkeys(self._from_unit(i / (points - 1)) for i in range(points)))  # (a tiny range: once)

    def _from_unit(self, u: float) -> float:
        if u in (0.0, 1.0):  # the ends exactly (exp(log(x)) need not be x)
            return self.low if u == 0.0 else self.high
        if self.log:
            value = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            value = self.low + u * (self.high - self.low)
        return min(max(value, self.low), self.high)  # rounding never leaves the range

    def sample(self, rng: random.Random) -> float:
        return self._from_unit(rng.random())

    def to_dict(self) -> dict[str, Any]:
        return {"type": "loguniform" if self.log else "uniform", "low": self.low, "high": self.high}


@dataclass(frozen=True)
class RandInt:
    """Integers from ``low`` to ``high``, both included."""

    low: int
    high: int

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"randint needs low <= high, got {self.low}, {self.high}")

    def grid(self, points: int) -> list[int]:
        span = self.high - self.low + 1
        if span <= max(points, 1):
            return list(range(self.low, self.high + 1))
        if points <= 1:
            return [(self.low + self.high) // 2]
        return sorted({round(self.low + i * (self.high - self.low) / (points - 1)) for i in range(points)})

    def sample(self, rng: random.Random) -> int:
        return rng.randint(self.low, self.high)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "randint", "low": self.low, "high": self.high}


Param = Choice | Uniform | RandInt
Space = dict[str, Param]


def choice(*values: Value) -> Choice:
    """One of the values: ``choice(16, 32, 64)`` or ``choice([16, 32, 64])``."""
    if len(values) == 1 and isinstance(values[0], (list, tuple)):
        values = tuple(values[0])
    return Choice(tuple(values))


def uniform(low: float, high: float) -> Uniform:
    return Uniform(float(low), float(high))


def loguniform(low: float, high: float) -> Uniform:
    """Uniform in log space (learning rates, weight decay)."""
    return Uniform(float(low), float(high), log=True)


def randint(low: int, high: int) -> RandInt:
    """An integer from ``low`` to ``high`` inclusive."""
    return RandInt(int(low), int(high))


def param_from_dict(d: Mapping[str, Any]) -> Param:
    kind = d.get("type")
    if kind == "choice":
        return Choice(tuple(d["values"]))
    if kind in ("uniform", "loguniform"):
        return Uniform(float(d["low"]), float(d["high"]), log=kind == "loguniform")
    if kind == "randint":
        return RandInt(int(d["low"]), int(d["high"]))
    raise ValueError(f"unknown parameter type {kind!r} (choice, uniform, loguniform, randint)")


def space_to_dict(space: Space) -> dict[str, dict[str, Any]]:
    return {name: p.to_dict() for name, p in space.items()}


def space_from_dict(d: Mapping[str, Mapping[str, Any]]) -> Space:
    return {name: param_from_dict(p) for name, p in d.items()}


def check_space(space: Mapping[str, Any]) -> Space:
    """The space with each value a parameter (a plain list is a choice); ValueError names a bad entry."""
    if not space:
        raise ValueError("the search space is empty")
    out: Space = {}
    for name, p in space.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"a parameter name must be an identifier, got {name!r}")
        if isinstance(p, (list, tuple)):
            p = choice(list(p))
        if not isinstance(p, (Choice, Uniform, RandInt)):
            raise ValueError(f"parameter {name}: use choice, uniform, loguniform or randint, got {p!r}")
        out[name] = p
    return out


def grid(space: Space, points: int = 3) -> Iterator[dict[str, Value]]:
    """Every combination, the first parameter slowest (``points`` values for each continuous one)."""
    names = list(space)
    for combo in itertools.product(*(space[n].grid(points) for n in names)):
        yield dict(zip(names, combo, strict=True))


def grid_size(space: Space, points: int = 3) -> int:
    return math.prod(len(p.grid(points)) for p in space.values())


def sample(space: Space, rng: random.Random) -> dict[str, Value]:
    return {name: p.sample(rng) for name, p in space.items()}
