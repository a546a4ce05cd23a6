#include "knmf/core/options.hpp"

#include "knmf/core/error.hpp"

namespace knmf {

std::string to_string(Dtype d) { return d == Dtype::float32 ? "float" : "double"; }

std::string to_string(XFormat f) {
  switch (f) {
    case XFormat::automatic: return "auto";
    case XFormat::dense: return "dense";
    case XFormat::sparse: return "sparse";
  }
  return "?";
}

std::string to_string(Distribution d) {
  switch (d) {
    case Distribution::jobs: return "jobs";
    case Distribution::rows: return "rows";
    case Distribution::automatic: return "auto";
  }
  return "?";
}

Dtype parse_dtype(const std::string& s, const std::string& option) {
  if (s == "float") return Dtype::float32;
  if (s == "double") return Dtype::float64;
  input_error(option, " '", s, "' is invalid: expected float or double");
}

XFormat parse_x_format(const std::string& s, const std::string& option) {
  if (s == "auto") return XFormat::automatic;
  if (s == "dense") return XFormat::dense;
  if (s == "sparse") return XFormat::sparse;
  input_error(option, " '", s, "' is invalid: expected auto, dense or sparse");
}

Distribution parse_distribution(const std::string& s, const std::string& option) {
  if (s == "jobs") return Distribution::jobs;
  if (s == "rows") return Distribution::rows;
  if (s == "auto") return Distribution::automatic;
  input_error(option, " '", s, "' is invalid: expected jobs, rows or auto");
}

}  // namespace knmf
