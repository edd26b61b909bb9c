"""``PUT /api/v2/local/jobs/{user}~{name}/maxRunTime`` ``{"minutes": N}``: the job page's "set work duration".

The job's owner or an admin; 409 once the job has ended or is stopping. See core/maxruntime.py for what is stored.
"""

from __future__ import annotations

from typing import Any

from ...protocol.rules import minutes_text
from ..core.maxruntime import check_minutes, set_max_run_time
from .base import Base, Route


class MaxRunTime(Base):
    def put(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        minutes = check_minutes(self.json_body().get("minutes"))
        result = set_max_run_time(self.cluster, row, minutes, self.user["name"])
        self.write_json(
            {"message": f"max run time of {row['user']}~{row['name']} set to {minutes_text(minutes)}", **result}
        )


def routes(job: str, args: dict[str, Any]) -> list[Route]:
    return [(job + r"/maxRunTime", MaxRunTime, args)]
