"""The `embrasure` command (docs/cli.md): main.py holds the group and serve/project;
one module per family of subcommands."""
