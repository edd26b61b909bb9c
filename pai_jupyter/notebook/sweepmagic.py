"""``%%pai_sweep NAME --space VAR``: a sweep (``pai_jupyter.Sweep``) of the cell's job template, or of the Estimator
in ``--estimator VAR``, with its live view; ``--attach`` re-attaches to a sweep the cluster holds (after a kernel
restart, or from another notebook) and resumes driving it. The sweep package is imported when the magic runs."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from . import display as ui
from .cellinput import interpolate
from .magicsupport import errors_as_output, split_args


@magics_class
class SweepMagics(Magics):
    @magic_arguments()
    @argument("name", help="the sweep's name (its trials are the jobs NAME-0000, NAME-0001, ...)")
    @argument("--space", "-s", help="a notebook variable: {param: choice(...) | uniform(a, b) | ...}")
    @argument("--estimator", "-e", help="a notebook variable holding an Estimator (instead of the cell's job)")
    @argument("--search", choices=["grid", "random", "optuna"], default="grid")
    @argument("--trials", "-n", type=int, help="at most this many trials (needed by random and optuna)")
    @argument("--concurrency", "-c", type=int, default=2, help="trials at a time (default 2)")
    @argument("--objective", default="loss", help="the reported metric to optimise (default loss)")
    @argument("--mode", choices=["min", "max"], default="min")
    @argument("--points", type=int, default=3, help="grid values per continuous parameter (default 3)")
    @argument("--seed", type=int, default=0)
    @argument("--no-prune", action="store_true", help="optuna: never stop a trial early")
    @argument("--attach", "-a", action="store_true", help="re-attach to the stored sweep NAME and resume it")
    @argument(
        "--wait", "-w", action="store_true", help="drive it in the cell until it is done (else: in the background)"
    )
    @argument("--no-plots", action="store_true", help="only the results table")
    @argument("--profile", "-p", help="cluster profile (default: the default one)")
    @argument("-o", "--out", dest="var", help="store the Sweep in this notebook variable")
    @line_cell_magic
    @errors_as_output
    def pai_sweep(self, line: str, cell: str | None = None) -> Any:
        """A sweep of the cell's job (``{name}`` takes a notebook variable, as in ``%%pai_submit``); as a line
        magic, ``%pai_sweep NAME --attach`` (or ``--estimator VAR``)."""
        cell = cell or ""
        from IPython.display import display

        from ..sweep import Sweep
        from ..sweep.views import SweepView

        args = split_args(self.pai_sweep, line)
        ns = self.shell.user_ns if self.shell is not None else {}
        if args.attach:
            sweep = Sweep.attach(args.name, profile=args.profile)
        else:
            if not args.space or args.space not in ns:
                raise UsageError("--space names a notebook variable holding the search space")
            template: Any = ns[args.estimator] if args.estimator else interpolate(cell, ns)
            if not args.estimator and not cell.strip():
                raise UsageError("the cell is the job template (v2 YAML with <% $parameters.x %>), or use --estimator")
            sweep = Sweep(
                args.name,
                template,
                ns[args.space],
                objective=args.objective,
                mode=args.mode,
                search=args.search,
                max_trials=args.trials,
                concurrency=args.concurrency,
                points=args.points,
                seed=args.seed,
                prune=not args.no_prune,
                profile=args.profile,
            )
        if args.var:
            ns[args.var] = sweep
        display(SweepView(sweep, plots=not args.no_plots))
        if sweep.status == "done":
            ui.show(f"sweep {sweep.name} is done", ui.esc(f"sweep {sweep.name} is done"))
        elif args.wait:
            sweep.run()
        else:
            sweep.start()
        return None
