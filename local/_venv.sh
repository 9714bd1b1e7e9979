# Sourced by local/run, local/test and .ci/run: make ./.venv with Python 3.11+ and install
# the project into it with the extras asked for ($1, e.g. "dev"). The stamp
# .venv/.postbag-installed records pyproject.toml's hash and every extra installed so far,
# so alternating ./local/run ("local") and ./local/test ("dev") installs once, not each time:
# pip runs only when pyproject.toml changed or an extra is missing, and then installs the
# extras already there as well.
set -euo pipefail

postbag_python() {
    for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "Postbag needs Python 3.11 or newer on PATH" >&2
    return 1
}

postbag_venv() {
    local wanted="${1:-}" hash stamp had extras spec="."
    if [ ! -x .venv/bin/python ]; then
        "$(postbag_python)" -m venv .venv
    fi
    hash="$(sha256sum <pyproject.toml | cut -c1-16)"
    stamp="$(cat .venv/.postbag-installed 2>/dev/null || true)"
    had=""
    case "$stamp" in *" "*) had="${stamp#* }" ;; esac
    extras="$(printf '%s\n' ${had//,/ } ${wanted//,/ } | sort -u | paste -sd, -)"
    if [ "$stamp" = "$hash $extras" ]; then
        return 0
    fi
    [ -n "$extras" ] && spec=".[$extras]"
    echo "Installing Postbag ($spec) into .venv ..." >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check \
        -e "$spec" --config-settings editable_mode=compat 2> >(grep -v '^WARNING: Location' >&2)
    echo "$hash $extras" >.venv/.postbag-installed
}
