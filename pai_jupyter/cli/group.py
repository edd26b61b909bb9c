"""The click group every ``pai`` command group uses: the aliases a newcomer types (``pai list``, ``pai ls``), a
"did you mean" for a mistyped command, and command descriptions that are wrapped instead of cut with "..."."""

from __future__ import annotations

import difflib

import click

ALIASES = {
    "list": "jobs",
    "ls": "jobs",
    "ps": "jobs",
    "show": "status",
    "info": "status",
    "log": "logs",
    "cancel": "stop",
    "kill": "stop",
    "rm": "delete",
    "remove": "delete",
    "run": "submit",
    "check": "validate",
}


class PaiGroup(click.Group):
    """A group that resolves ``ALIASES`` to its own commands and suggests the closest names for an unknown one."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in ALIASES:
            command = super().get_command(ctx, ALIASES[cmd_name])
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if args and not name.startswith("-") and self.get_command(ctx, name) is None:
            ctx.fail(f"No such command {name!r}.{self.suggestion(ctx, name)}")
        return super().resolve_command(ctx, args)

    def suggestion(self, ctx: click.Context, name: str) -> str:
        """`` Did you mean: jobs?`` for the closest command names (or an alias's target), or ""."""
        commands = self.list_commands(ctx)
        aliases = {alias: target for alias, target in ALIASES.items() if target in commands}
        close = difflib.get_close_matches(name, commands + list(aliases), n=3, cutoff=0.6)
        names = list(dict.fromkeys(aliases.get(match, match) for match in close))
        if not names:
            return f" The commands: {', '.join(commands)} (`{ctx.command_path} --help` says what each does)."
        return f" Did you mean: {' or '.join(names)}?"

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command with its whole first sentence, wrapped to the width (click cuts it to one line)."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            rows.append((name, command.get_short_help_str(limit=1_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
