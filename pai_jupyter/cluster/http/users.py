"""The admin's user routes (local extensions): ``POST /api/v2/local/users`` adds a user (or gives one a new
token), optionally mapped to a regular OS account of this host (``account``: their tasks run as it, see
core/accounts.py), and with the ``email`` their jobs' notifications are mailed to (core/notify.py);
``DELETE /api/v2/local/users/{name}`` removes one (core/offboard.py)."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from ..core.errors import BadRequest, ConflictJobError, ForbiddenUserError
from ..core.offboard import remove_user
from ..core.store.users import USER_NAME as NAME
from .base import Base, Route

EMAIL = re.compile(r"[^@\s<>,;]{1,64}@[^@\s<>,;]{1,255}")


class Users(Base):
    def post(self) -> None:
        if not self.is_admin:
            raise ForbiddenUserError("only an admin can add users")
        body = self.json_body()
        name = body.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise BadRequest(
                "a user name starts with a letter or digit, then letters, digits, '-', '_' and '.' (at most 64)"
            )
        admin, password, account = body.get("admin", False), body.get("password"), body.get("account")
        if not isinstance(admin, bool):
            raise BadRequest("admin must be true or false")
        if password is not None and (not isinstance(password, str) or len(password) < 6):
            raise BadRequest("a password must be a string of at least 6 characters")
        if account is not None and not isinstance(account, str):
            raise BadRequest("account must be the name of an OS account")
        email = body.get("email")
        if email is not None and (not isinstance(email, str) or not EMAIL.fullmatch(email)):
            raise BadRequest("email must be one e-mail address (name@domain)")
        store, accounts = self.cluster.store, self.cluster.accounts
        self.cluster.admit_user(name)
        mapped = store.account_of(name)
        if account is not None:
            if not accounts.isolating or name == accounts.owner:
                raise ConflictJobError(
                    f"{name}'s tasks do not run as an OS account of their own on this cluster (the daemon is not "
                    "root, tasks are containers, or the user owns the cluster): leave account out"
                )
            if mapped != account and store.unfinished_jobs(name):
                raise ConflictJobError(
                    f"user {name}'s tasks run as {mapped or 'an account of their own'} and some of their jobs have "
                    "not ended: stop them first to map the user to another account"
                )
            accounts.vet(name, account)
        elif mapped is None:
            accounts.vet(name, None)
        with store.tx():
            store.ensure_user(name, admin=admin)
            if account is not None:
                try:
                    store.set_account(name, account)
                except sqlite3.IntegrityError:
                    raise ConflictJobError(
                        f"the OS account {account} runs the tasks of user {store.user_of_account(account)} already"
                    ) from None
            if password:
                store.set_password(name, password)
            if email is not None:
                store.set_email(name, email)
            token = store.new_token(name, "created by admin")
        if account is not None and account != mapped:  # their next task runs as it, their directories are its
            accounts.forget(name)
            self.cluster.forget_home(name)
        self.write_json({"name": name, "token": token}, 201)


class User(Base):
    async def delete(self, name: str) -> None:
        if not self.is_admin:
            raise ForbiddenUserError("only an admin can remove users")
        self.write_json(await remove_user(self.cluster, name, self.user["name"]))


def routes(args: dict[str, Any]) -> list[Route]:
    return [
        (r"/api/v2/local/users", Users, args),
        (r"/api/v2/local/users/([^/]+)", User, args),
    ]
