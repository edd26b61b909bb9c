"""Users, their passwords and API tokens (only hashes are stored), the OS account an admin mapped a user to, and a
user's removal."""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from typing import cast

from ....common.states import FINAL
from .db import Database
from .rows import JobCore, TokenRow, TokenUser, UserRow, UserSummary
from .schema import CORE_COLUMNS, sql_set


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def hash_password(password: str, salt: bytes | None = None) -> str:
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 200_000)
    return f"pbkdf2${salt.hex()}${digest.hex()}"


def check_password(password: str, stored: str | None) -> bool:
    if not stored or not stored.startswith("pbkdf2$"):
        return False
    _, salt, _digest = stored.split("$")
    return secrets.compare_digest(hash_password(password, bytes.fromhex(salt)), stored)


APPLICATION = "application"  # the label of OpenPAI's application tokens: for job operations only
OWNER = "admin (runtime.json)"  # the label of the token the daemon writes to runtime.json for its owner
USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # what a user's name may be (it names directories)


class Users(Database):
    """The users and tokens tables."""

    def ensure_user(self, name: str, *, admin: bool = False) -> None:
        with self.tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO users (name, admin, created) VALUES (?, ?, ?)", (name, int(admin), time.time())
            )
            if admin:
                db.execute("UPDATE users SET admin = 1 WHERE name = ?", (name,))

    def set_password(self, name: str, password: str) -> None:
        with self.tx() as db:
            db.execute("UPDATE users SET password_hash = ? WHERE name = ?", (hash_password(password), name))

    def new_token(self, user: str, label: str = "") -> str:
        token = secrets.token_urlsafe(32)
        with self.tx() as db:
            db.execute(
                "INSERT INTO tokens (hash, user, label, created) VALUES (?, ?, ?, ?)",
                (hash_token(token), user, label, time.time()),
            )
        return token

    def user_for_token(self, token: str) -> TokenUser | None:
        return cast(
            "TokenUser | None",
            self.one(
                "SELECT u.name, u.admin FROM tokens t JOIN users u ON u.name = t.user WHERE t.hash = ?",
                (hash_token(token),),
            ),
        )

    def user(self, name: str) -> UserRow | None:
        return cast("UserRow | None", self.one("SELECT * FROM users WHERE name = ?", (name,)))

    def token_label(self, token: str) -> str | None:
        """The label a token was made with (``APPLICATION`` for an application token), None if none or no such."""
        row = self.db.execute("SELECT label FROM tokens WHERE hash = ?", (hash_token(token),)).fetchone()
        return row[0] if row else None

    def tokens(self, user: str) -> list[TokenRow]:
        """The user's tokens: label, created, the stored hash, and an id to name one by (not the token)."""
        rows = self.all("SELECT hash, label, created FROM tokens WHERE user = ? ORDER BY created", (user,))
        for r in rows:
            r["id"] = f"sha256-{r['hash'][:16]}"
        return cast("list[TokenRow]", rows)

    def revoke_token(self, digest: str) -> None:
        self.db.execute("DELETE FROM tokens WHERE hash = ?", (digest,))

    def find_token(self, token: str, user: str | None) -> str | None:
        """The stored hash of ``token`` (the token itself, or its listed id), among ``user``'s tokens or, with
        None (an admin asking), anyone's; None when it names no token (or, by an id, more than one)."""
        rows = self.db.execute(
            "SELECT hash FROM tokens WHERE (hash = ? OR 'sha256-' || substr(hash, 1, 16) = ?) "
            "AND (? IS NULL OR user = ?) LIMIT 2",
            (hash_token(token), token, user, user),
        ).fetchall()
        return rows[0][0] if len(rows) == 1 else None

    # ---- the OS account a user's tasks run as (core/accounts.py) -------------------------------------------------
    def account_of(self, user: str) -> str | None:
        """The OS account an admin mapped ``user`` to (None: the daemon's own ``pai-`` account)."""
        row = self.db.execute("SELECT account FROM user_accounts WHERE user = ?", (user,)).fetchone()
        return row[0] if row else None

    def user_of_account(self, account: str) -> str | None:
        row = self.db.execute("SELECT user FROM user_accounts WHERE account = ?", (account,)).fetchone()
        return row[0] if row else None

    def set_account(self, user: str, account: str) -> None:
        """Map ``user`` to ``account``; IntegrityError when another user has it."""
        self.db.execute(
            "INSERT INTO user_accounts (user, account) VALUES (?, ?) "
            "ON CONFLICT (user) DO UPDATE SET account = excluded.account",
            (user, account),
        )

    # ---- the address job notifications are mailed to (core/notify.py) ------------------------------------------
    def email_of(self, user: str) -> str | None:
        row = self.db.execute("SELECT email FROM user_emails WHERE user = ?", (user,)).fetchone()
        return row[0] if row else None

    def set_email(self, user: str, email: str) -> None:
        self.db.execute(
            "INSERT INTO user_emails (user, email) VALUES (?, ?) "
            "ON CONFLICT (user) DO UPDATE SET email = excluded.email",
            (user, email),
        )

    # ---- removal -------------------------------------------------------------------------------------------------
    def remove_user(self, name: str) -> int:
        """Delete the user with their password, tokens and account mapping (their jobs stay, as records);
        returns how many tokens were revoked."""
        with self.tx() as db:
            revoked = db.execute("DELETE FROM tokens WHERE user = ?", (name,)).rowcount
            db.execute("DELETE FROM users WHERE name = ?", (name,))
        return revoked

    def unfinished_jobs(self, user: str) -> list[JobCore]:
        """The user's jobs that have not reached a final state."""
        sql = f"SELECT {CORE_COLUMNS} FROM jobs WHERE user = ? AND state NOT IN {sql_set(FINAL)}"
        return cast("list[JobCore]", self.all(sql, (user,)))

    def users(self) -> list[UserSummary]:
        return cast("list[UserSummary]", self.all("SELECT name, admin, created FROM users ORDER BY name"))

    def user_names(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT name FROM users").fetchall()}

    # ---- the users a JupyterHub made (core/hub.py) --------------------------------------------------------------
    def add_hub_user(self, name: str, *, admin: bool) -> bool:
        """Make user ``name`` as one the Hub made, unless a user of that name exists (then nothing changes: a user
        an admin added is never marked, so never offboarded for the Hub); True when it was made now."""
        with self.tx() as db:
            now = time.time()
            made = db.execute(
                "INSERT OR IGNORE INTO users (name, admin, created) VALUES (?, ?, ?)", (name, int(admin), now)
            ).rowcount
            if made:
                db.execute("INSERT OR IGNORE INTO hub_users (user, created) VALUES (?, ?)", (name, now))
        return bool(made)

    def hub_users(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT user FROM hub_users").fetchall()}

    def is_hub_user(self, name: str) -> bool:
        return self.db.execute("SELECT 1 FROM hub_users WHERE user = ?", (name,)).fetchone() is not None

    def set_admin(self, name: str, admin: bool) -> None:
        self.db.execute("UPDATE users SET admin = ? WHERE name = ?", (int(admin), name))
