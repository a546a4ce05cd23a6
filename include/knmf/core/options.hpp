#pragma once
/// \file
/// The run options that name a choice (`--dtype`, `--format`, `--distribute`) as types: the
/// driver parses the option's text into one of these, and everything inward compares enums.
/// `to_string` gives the option's text back (the results file stores the dtype that way).

#include <string>

namespace knmf {

/// Precision of X and of the solver (`--dtype float|double`).
enum class Dtype { float32, float64 };

/// X on the device (`--format auto|dense|sparse`): `automatic` chooses by density and memory.
enum class XFormat { automatic, dense, sparse };

/// How an MPI run shares its work (`--distribute jobs|rows|auto`): whole jobs per rank, X
/// partitioned by rows, or `automatic` (rows when X does not fit one device).
enum class Distribution { jobs, rows, automatic };

/// "float" / "double".
std::string to_string(Dtype d);
/// "auto" / "dense" / "sparse".
std::string to_string(XFormat f);
/// "jobs" / "rows" / "auto".
std::string to_string(Distribution d);

/// Bytes of one value of the compute type.
constexpr int element_bytes(Dtype d) { return d == Dtype::float32 ? 4 : 8; }

/// Parse the option's text; InputError naming `option` and the value otherwise
/// ("--dtype 'half' is invalid: expected float or double").
Dtype parse_dtype(const std::string& s, const std::string& option = "--dtype");
XFormat parse_x_format(const std::string& s, const std::string& option = "--format");
Distribution parse_distribution(const std::string& s, const std::string& option = "--distribute");

}  // namespace knmf
