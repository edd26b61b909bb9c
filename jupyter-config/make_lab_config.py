# Read by `make lab` (jupyter lab --config=...): Lab's own terminals start the user's shell as an interactive, not a
# login, shell, so they keep the PATH make gave the server (the venv's bin first: `pai`, `jupyter`). Jupyter's default
# without a tty (make's output piped, a service) is a login shell, whose /etc/profile resets PATH.
import os

c = get_config()  # noqa: F821 (Jupyter's config loader provides it)
c.ServerApp.terminado_settings = {"shell_command": [os.environ.get("SHELL") or "/bin/sh"]}
