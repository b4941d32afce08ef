from tracelens.cli import run

run()
