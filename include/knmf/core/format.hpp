#pragma once
/// \file
/// Text formatting shared by every part of knmf (log lines, error messages, file attributes):
/// byte counts, durations, doubles that read back exactly, UTC timestamps, JSON strings.
/// Each exists once, here.

#include <cstddef>
#include <string>
#include <vector>

namespace knmf {

/// Human-readable byte count in powers of 1000: "512 B", "1.23 GB".
std::string format_bytes(double bytes);
/// A duration for log lines: "4.2 s", "3m07s", "2h05m".
std::string format_seconds(double seconds);
/// The shortest decimal form that reads back as the same double (like Python's repr of a
/// float, without its ".0"): 0.0001 -> "0.0001", 1e-4 -> "0.0001", 0.1 + 0.2 -> "0.30000000000000004".
std::string format_double(double v);
/// Now, as ISO 8601 UTC: "2024-05-01T12:34:56Z".
std::string iso_now();
/// `s` as a JSON string literal (quotes, backslashes and control characters escaped), cut
/// to its first `max_bytes` bytes.
std::string json_string(const std::string& s, std::size_t max_bytes = std::string::npos);
/// "5 6 7".
std::string join_ints(const std::vector<int>& v);

}  // namespace knmf
