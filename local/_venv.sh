# Sourced by local/run and local/test: make ./.venv with Python 3.11+ and install the
# project into it (again only when pyproject.toml changed). $1: the extras, e.g. "dev".
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
    local extras="${1:-}" spec="." stamp
    [ -n "$extras" ] && spec=".[$extras]"
    if [ ! -x .venv/bin/python ]; then
        "$(postbag_python)" -m venv .venv
    fi
    stamp="$(cat pyproject.toml | sha256sum | cut -c1-16)-$extras"
    if [ "$(cat .venv/.postbag-installed 2>/dev/null)" != "$stamp" ]; then
        echo "Installing Postbag ($spec) into .venv ..." >&2
        .venv/bin/python -m pip install --quiet --disable-pip-version-check \
            -e "$spec" --config-settings editable_mode=compat 2> >(grep -v '^WARNING: Location' >&2)
        echo "$stamp" > .venv/.postbag-installed
    fi
}
