"""``GET /api/v2/local/usage?window=<hours>&user=<name>``: what each user ran in each virtual cluster over the last
``window`` hours (default a week): GPU-hours allocated (and used and idle where the cluster samples GPU use), CPU-
and memory-hours, the attempts started and how long they waited (core/store/usage.py). Fair share orders users by
such figures: those it orders see them. A user gets their own rows and each virtual cluster's totals (no other
user's name); an admin gets everyone's, or one user's with ``user``."""

from __future__ import annotations

import math
from typing import Any

from ..core.errors import BadRequest, ForbiddenUserError
from ..core.store import now_ms
from ..core.store.usage import HOUR_MS, usage, vc_totals
from .base import Base, Route

DEFAULT_WINDOW_HOURS = 24 * 7
MAX_WINDOW_HOURS = 24 * 366
GPU_USE = "GPU use is not sampled per task on this cluster: GPU-hours used and idle are unknown (null)"


class Usage(Base):
    def get(self) -> None:
        window = self._window()
        who = self.get_argument("user", None)
        me = self.user["name"]
        if who is not None and who != me and not self.is_admin:
            raise ForbiddenUserError("only an admin may see another user's usage")
        now = now_ms()
        since = now - int(window * HOUR_MS)
        rows = usage(self.cluster.store, since, now)
        half_life = self.cluster.state.sharing.half_life_s
        if half_life > 0:  # the usage the last scheduling pass ordered users by (core/shares.py), per user
            fair = self.cluster.fair_share_usage()
            for r in rows:
                r.fair_share_usage = round(fair.get(r.user or "", 0.0) / 3600, 4) if r.user else None
        totals = vc_totals(rows)  # of everyone: a user's fair share is weighed against them
        shown = who if who is not None else (None if self.is_admin else me)
        if shown is not None:
            rows = [r for r in rows if r.user == shown]
        self.write_json(
            {
                "windowHours": window,
                "since": since,
                "now": now,
                "allUsers": self.is_admin and who is None,
                "gpuUse": {"sampled": False, "message": GPU_USE},
                "fairShare": {"halfLifeHours": half_life / 3600 if half_life > 0 else None},
                "rows": [r.to_json() for r in rows],
                "virtualClusters": [t.to_json() for t in totals],
            }
        )

    def _window(self) -> float:
        raw = self.get_argument("window", None)
        if raw is None:
            return float(DEFAULT_WINDOW_HOURS)
        try:
            value = float(raw)
        except ValueError:
            raise BadRequest(f"window must be a number of hours, got {raw!r}") from None
        if not math.isfinite(value) or value <= 0 or value > MAX_WINDOW_HOURS:
            raise BadRequest(f"window must be more than 0 and at most {MAX_WINDOW_HOURS} hours")
        return value


def routes(args: dict[str, Any]) -> list[Route]:
    return [(r"/api/v2/local/usage", Usage, args)]
