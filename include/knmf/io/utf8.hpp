#pragma once
/// \file
/// UTF-8 checks of names (cell barcodes, gene names) that knmf stores as UTF-8 strings (h5ad,
/// its results file, cNMF's data frames): readers refuse names that are not UTF-8 where they
/// read them, writers where they are given them, naming the file, the position and the bytes.

#include <cstddef>
#include <string>
#include <string_view>

namespace knmf::io {

/// Offset of the first byte of `s` that is not part of well-formed UTF-8 (no overlong forms,
/// no surrogates, nothing above U+10FFFF), or npos.
std::size_t invalid_utf8_at(std::string_view s);

/// "47 65 6e ff": the bytes of `s` in hex (at most 64 of them, then "...").
std::string hex_bytes(std::string_view s);

/// InputError "WHERE is not valid UTF-8 at byte B (bytes ..): knmf stores names as UTF-8"
/// unless `name` is valid UTF-8. WHERE names the file and the position, e.g.
/// "barcodes.tsv: line 7 (a cell barcode)".
void require_utf8_name(std::string_view name, const std::string& where);

}  // namespace knmf::io
