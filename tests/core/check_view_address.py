#!/usr/bin/env python3
"""Static check: no host code takes the address of a device View's element.

`&V(i, j)` calls the View's operator(), which Kokkos checks against the memory space at run
time: on a GPU, host code doing so on device memory aborts ("attempt to access inaccessible
memory space"), while on a host backend it works, and the memory guard of the device-kernels
build cannot see it either (nothing is touched: it is address arithmetic). Device code needs
an element's address legitimately, and host Views are fine; every such place is listed below
with the reason it is not host code on device memory. Anything else fails the check, and so
does a listed place that is no longer there (the list must not outlive its reasons).

    check_view_address.py SOURCE_DIR
"""
import pathlib
import re
import sys

# (file, the expression as written): why it is allowed
ALLOWED = {
    ("src/solver/detail/kernels.hpp", "&partial("):
        "GramTeam, a KOKKOS_INLINE_FUNCTION constructed inside the Gram kernels (knmf::gram::chunks, knmf::gram::blocks): device code",
    ("src/solver/detail/kernels.hpp", "&G("):
        "the host-tuned branch (if constexpr (host_tuned_kernels)): a host backend only",
    ("src/matrix/streamed_matrix.cpp", "&row_map_("):
        "row_map_ is a pinned host View (PinnedHostSpace)",
    ("src/matrix/streamed_matrix.cpp", "&csc_map_("):
        "csc_map_ is a host View (host_view)",
    ("src/prepare/cnmf_prepare.cpp", "&tpm->source("):
        "a member function returning a reference, not a View",
    ("src/io/hdf5.cpp", "&latched("):
        "a function returning a pointer, not a View",
}

# `&` (not `&&`, not a reference declaration) right after `(`, `,`, `=`, `?`, `:` or `return`,
# then a name (with `.`/`->` members), then a call: `&P(0, r0)`, `&w.x(i)`, `&a->b(i)`.
ADDRESS_OF_CALL = re.compile(
    r"(?:[(,=?:]|\breturn)\s*(&\s*[A-Za-z_]\w*(?:(?:\.|->)[A-Za-z_]\w*)*\s*\()")


def strip_comments(text):
    """Comments and string literals blanked (newlines kept, so line numbers stay)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * max(0, j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    files = sorted(p for d in ("src", "include", "drivers") for p in (root / d).rglob("*")
                   if p.suffix in (".hpp", ".cpp", ".h"))
    if not files:
        print(f"check_view_address: no sources under {root}", file=sys.stderr)
        return 2
    found, bad = set(), []
    for path in files:
        rel = path.relative_to(root).as_posix()
        text = strip_comments(path.read_text(encoding="utf-8", errors="replace"))
        for m in ADDRESS_OF_CALL.finditer(text):
            expr = re.sub(r"\s+", "", m.group(1))
            line = text.count("\n", 0, m.start(1)) + 1
            if (rel, expr) in ALLOWED:
                found.add((rel, expr))
            else:
                bad.append(f"{rel}:{line}: {expr}...) takes the address of a View element (or of a "
                           f"call's result) in code not known to be device code or a host View")
    stale = [f"{f}: '{e}' is listed as allowed but no longer found ({why})"
             for (f, e), why in ALLOWED.items() if (f, e) not in found]
    for msg in bad + stale:
        print("check_view_address: " + msg, file=sys.stderr)
    if bad:
        print("check_view_address: use a subview or pointer arithmetic on data() for device Views "
              "(src/solver/detail/products.hpp), or list the place with its reason in "
              "tests/core/check_view_address.py", file=sys.stderr)
    if bad or stale:
        return 1
    print(f"check_view_address: {len(files)} files, {len(found)} allowed places, no host "
          f"address-taking of a device View")
    return 0


if __name__ == "__main__":
    sys.exit(main())
