from workbench.cli import program

raise SystemExit(program())
