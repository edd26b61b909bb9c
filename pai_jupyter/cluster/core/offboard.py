"""Removing a user (``DELETE /api/v2/local/users/{name}``, ``pai cluster user remove NAME``): nothing of theirs
keeps working. Their tokens, password and account mapping go at once (their next request is 401), every job of
theirs is stopped, and once those have ended the OS account the daemon made for them is removed (``userdel``),
its files given to root first (a later account may get its uid). Their jobs stay as stopped records and their
files as root's, for an admin to keep or delete. Removing the user again removes an account that was kept (its
processes had not ended yet); the account of a name this cluster never had is not its to remove (another cluster
on the host may use it)."""

from __future__ import annotations

import asyncio
import glob
from typing import TYPE_CHECKING, Any

from .errors import ConflictJobError, NoUserError

if TYPE_CHECKING:
    from .service import Cluster

STOP_WAIT = 30.0  # seconds past the stop grace that a removal waits for the user's jobs to end


async def remove_user(cluster: Cluster, name: str, by: str) -> dict[str, Any]:
    """Revoke, stop, wait, remove the account; the answer says what was done and what was kept, and why."""
    accounts, store = cluster.accounts, cluster.store
    if name == accounts.owner:
        raise ConflictJobError(f"{name} owns this cluster (the daemon runs as that account); it cannot be removed")
    mapped = store.account_of(name)
    existed = store.user(name) is not None
    files = [cluster.dir / "users" / name, *cluster.dir.joinpath("jobs").glob(f"{glob.escape(name)}~*")]
    ours = any(f.exists() for f in files)  # a user of this cluster once
    if not existed and not (ours and (accounts.made_for(name) or store.unfinished_jobs(name))):
        raise NoUserError(f"User {name} is not found.")
    revoked = store.remove_user(name) if existed else 0
    jobs = store.unfinished_jobs(name)
    for row in jobs:
        cluster.stop(row, f"stopped: user {name} was removed by {by}")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + cluster.stop_grace + STOP_WAIT
    while (left := store.unfinished_jobs(name)) and loop.time() < deadline:
        await asyncio.sleep(0.1)
    cluster.forget_home(name)
    if left:
        account, removed = accounts.made_for(name), False
        note = f"the OS account was kept: jobs {', '.join(r['name'] for r in left)} have not ended yet"
    else:
        account, removed, note = await loop.run_in_executor(None, accounts.remove, name, files)
    if mapped:
        note = f"their tasks ran as the host's account {mapped}, which stays; " + note
    return {
        "name": name,
        "revokedTokens": revoked,
        "stoppedJobs": [f"{r['user']}~{r['name']}" for r in jobs],
        "account": account,
        "accountRemoved": removed,
        "message": f"user {name} removed: {revoked} tokens revoked, {len(jobs)} jobs stopped; {note}",
    }
