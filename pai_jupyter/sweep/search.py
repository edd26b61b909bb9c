"""How a sweep picks the next trial's parameters: ``grid``, ``random`` (built in) and ``optuna`` (ask/tell with
TPE and a median pruner, ``pip install pai_jupyter[optuna]``).

Every search rebuilds itself from the sweep's stored trials, so a driver that attaches to a running sweep
continues it: grid and random pick by the trial's number (random draws from a generator seeded with the sweep's
seed and that number), Optuna is told every finished trial again (``add_trial``) before it asks for more.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol

from ..common.sweepstate import ENDED, FINISHED, PRUNED
from .space import Choice, RandInt, Space, Uniform, grid, grid_size, sample


class Search(Protocol):
    def ask(self, number: int) -> dict[str, Any] | None:
        """The parameters of trial ``number``; None when the search has nothing more to try."""

    def intermediate(self, number: int, step: int, value: float) -> bool:
        """A live trial reported the objective at ``step``: True when it should be stopped (pruned)."""

    def forget(self, number: int) -> None:
        """Trial ``number`` was asked for but an earlier driver's job of that number is adopted instead."""

    def tell(self, trial: dict[str, Any]) -> None:
        """A trial ended (its stored record: ``number``, ``params``, ``state``, ``value``, ``intermediate``)."""


class GridSearch:
    def __init__(self, space: Space, points: int = 3) -> None:
        self.combos = list(grid(space, points))

    def ask(self, number: int) -> dict[str, Any] | None:
        return self.combos[number] if number < len(self.combos) else None

    def intermediate(self, number: int, step: int, value: float) -> bool:
        return False

    def forget(self, number: int) -> None:
        return None

    def tell(self, trial: dict[str, Any]) -> None:
        return None


class RandomSearch:
    def __init__(self, space: Space, seed: int = 0) -> None:
        self.space, self.seed = space, seed

    def ask(self, number: int) -> dict[str, Any] | None:
        return sample(self.space, random.Random(f"{self.seed}:{number}"))

    def intermediate(self, number: int, step: int, value: float) -> bool:
        return False

    def forget(self, number: int) -> None:
        return None

    def tell(self, trial: dict[str, Any]) -> None:
        return None


def _distribution(p: Any) -> Any:
    import optuna

    if isinstance(p, Choice):
        return optuna.distributions.CategoricalDistribution(p.values)
    if isinstance(p, Uniform):
        return optuna.distributions.FloatDistribution(p.low, p.high, log=p.log)
    if isinstance(p, RandInt):
        return optuna.distributions.IntDistribution(p.low, p.high)
    raise TypeError(p)


class OptunaSearch:
    """Optuna's ask/tell: TPE (seeded) and, with ``prune``, its median pruner on the reported objective."""

    def __init__(
        self, space: Space, mode: str, seed: int = 0, prune: bool = True, trials: Sequence[dict[str, Any]] = ()
    ) -> None:
        try:
            import optuna
        except ImportError:
            raise ImportError("search='optuna' needs optuna: pip install 'pai_jupyter[optuna]'") from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.dists = {name: _distribution(p) for name, p in space.items()}
        pruner = optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1) if prune else None
        self.study = optuna.create_study(
            direction="minimize" if mode == "min" else "maximize",
            sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=8),
            pruner=pruner or optuna.pruners.NopPruner(),
        )
        self.live: dict[int, Any] = {}
        for t in trials:  # a resumed sweep: what it learnt so far
            self.tell(t)

    def ask(self, number: int) -> dict[str, Any] | None:
        trial = self.study.ask(self.dists)
        self.live[number] = trial
        return dict(trial.params)

    def intermediate(self, number: int, step: int, value: float) -> bool:
        trial = self.live.get(number)
        if trial is None:  # asked by an earlier driver: it is told when it ends
            return False
        trial.report(value, step)
        return bool(trial.should_prune())

    def forget(self, number: int) -> None:
        trial = self.live.pop(number, None)
        if trial is not None:  # (the adopted job is told as an added trial when it ends)
            self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)

    def tell(self, trial: dict[str, Any]) -> None:
        states = self.optuna.trial.TrialState
        state = {FINISHED: states.COMPLETE, PRUNED: states.PRUNED}.get(trial["state"], states.FAIL)
        value = trial.get("value")
        if state == states.COMPLETE and value is None:
            state = states.FAIL
        live = self.live.pop(trial["number"], None)
        if live is not None:
            self.study.tell(live, value if state == states.COMPLETE else None, state=state)
            return
        if set(trial.get("params") or {}) != set(self.dists):
            return
        self.study.add_trial(
            self.optuna.trial.create_trial(
                params=trial["params"],
                distributions=self.dists,
                value=value if state == states.COMPLETE else None,
                intermediate_values={int(k): v for k, v in (trial.get("intermediate") or {}).items()},
                state=state,
            )
        )


def make_search(
    kind: str, space: Space, *, mode: str, seed: int, points: int, prune: bool, trials: list[dict[str, Any]]
) -> Search:
    if kind == "grid":
        return GridSearch(space, points)
    if kind == "random":
        return RandomSearch(space, seed)
    if kind == "optuna":
        return OptunaSearch(space, mode, seed, prune, [t for t in trials if t["state"] in ENDED])
    raise ValueError(f"search is grid, random or optuna, got {kind!r}")


def search_size(kind: str, space: Space, points: int) -> int | None:
    """How many trials the search can give (None: as many as asked)."""
    return grid_size(space, points) if kind == "grid" else None
