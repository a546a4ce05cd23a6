#!/usr/bin/env bash
# `pip install .` from a fresh copy of the checkout, as a user does (docs/install.md):
#   python3 -m venv --system-site-packages V && V/bin/pip install --no-build-isolation .
# then, outside the copy with PYTHONPATH unset: knmf imports from V and knmf.factorize on a
# 200 x 50 matrix returns k = 3 spectra; `pip uninstall -y knmf` leaves no knmf file in V; the
# build wrote nothing into the copy but build-python/; `pip install -e .` is refused with knmf's
# one line. Reuses the Kokkos prefix (cmake/bootstrap.sh --prefix-only) and the compiler cache.
#
#   tests/python/pip_install.sh SOURCE_DIR PYTHON3
set -euo pipefail
src=$1 py=$2
tmp=$(mktemp -d /tmp/knmf-pip.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "pip_install: $*" >&2; exit 1; }

# a fresh clone's files (tracked, and new files git does not ignore), without build folders
mkdir "$tmp/knmf"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$src" ls-files -z -co --exclude-standard | (cd "$src" && tar --null -T - -cf -) |
    tar -xf - -C "$tmp/knmf"
else
  tar -C "$src" --exclude='./build*' --exclude=__pycache__ -cf - . | tar -xf - -C "$tmp/knmf"
fi
(cd "$tmp/knmf" && find . -type f | sort) > "$tmp/files.before"

"$py" -m venv --system-site-packages "$tmp/V"
# --no-index: numpy and scipy come from the system (the venv sees them); nothing is downloaded
(cd "$tmp/knmf" && "$tmp/V/bin/pip" install -q --no-index --no-build-isolation .) ||
  fail "pip install --no-build-isolation . failed (above)"

site=$("$tmp/V/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
(cd "$tmp" && env -u PYTHONPATH "$tmp/V/bin/python" - "$tmp/V" <<'EOF'
import os, sys
import numpy as np
import knmf
venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(knmf.__file__)
assert where.startswith(venv + os.sep), f"knmf imported from {where}, not from the venv {venv}"
X = np.random.RandomState(0).gamma(1.0, 1.0, size=(200, 50))
res = knmf.factorize(X, 3, n_replicates=2, seed=14)
assert res.spectra.shape == (2, 3, 50), res.spectra.shape
assert res.usages.shape == (2, 200, 3), res.usages.shape
assert all(s in ("converged", "max_iter") for s in res.status), res.status
assert np.isfinite(res.spectra).all() and (res.spectra >= 0).all()
print(f"knmf {knmf.__version__} from {where}: spectra {res.spectra.shape}")
EOF
) || fail "the installed knmf did not import or factorize (above)"

(cd "$tmp/knmf" && find . -type f -not -path './build-python/*' | sort) > "$tmp/files.after"
diff "$tmp/files.before" "$tmp/files.after" >&2 ||
  fail "pip install wrote into the checkout outside build-python/ (the lines above)"

out=$(cd "$tmp/knmf" && "$tmp/V/bin/pip" install --no-index --no-build-isolation -e . 2>&1) &&
  fail "pip install -e . succeeded; it is meant to be refused"
grep -q '^ *knmf: pip install -e is not supported' <<< "$out" ||
  { echo "$out" >&2; fail "pip install -e . failed without knmf's line (above)"; }

"$tmp/V/bin/pip" uninstall -q -y knmf
left=$(find "$site" -maxdepth 1 -iname 'knmf*')
[[ -z $left ]] || fail "pip uninstall -y knmf left: $left"
"$tmp/V/bin/python" -c 'import knmf' 2>/dev/null && fail "knmf still imports after pip uninstall"
echo "pip_install: installed, imported from the venv, factorized, uninstalled without a trace"
