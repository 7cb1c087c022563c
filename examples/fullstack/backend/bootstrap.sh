#!/bin/sh
# Make backend/.venv hold exactly requirements.txt, at most once at a time.
#
# Two binky steps need the venv and may run at the same moment in a new world: the api's
# `setup`, which runs as soon as the worktree exists, and the db's `migrate`/`seed`, which
# run as soon as the world's database exists (not after the api's setup). Both call this
# script; `flock` makes the second wait for the first, and the stamp makes every later
# call a no-op (a few ms) once the venv matches requirements.txt — also when the venv was
# copied into the worktree by `[project] copy`.
#
# pip is always run as `.venv/bin/python -m pip`, never `.venv/bin/pip`: a copied venv's
# scripts keep the shebang of the checkout it was copied from, so `.venv/bin/pip` would
# install into that other checkout's venv.
set -eu
cd "$(dirname "$0")"
exec 9>.venv.lock
flock 9
if [ -x .venv/bin/python ] && cmp -s requirements.txt .venv/requirements.installed; then
    exit 0
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
cp requirements.txt .venv/requirements.installed
