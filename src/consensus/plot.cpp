// Figures of the consensus step with cairo (see knmf/consensus/plot.hpp).
#include "knmf/consensus/plot.hpp"

#include <cairo.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <unistd.h>

#include "knmf/io/atomic_file.hpp"
#include "knmf/core/error.hpp"
#include "knmf/io/dataframe.hpp"

namespace knmf::consensus {

namespace {

constexpr double dpi = 250.0;
double pt(double points) { return points * dpi / 72.0; }  // points -> pixels
const char* font = "DejaVu Sans";

struct Rgb {
  double r, g, b;
};
const Rgb blue{0.0, 0.0, 1.0}, red{1.0, 0.0, 0.0}, black{0, 0, 0}, grid_gray{0.69, 0.69, 0.69};

void set(cairo_t* cr, const Rgb& c, double alpha = 1.0) { cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha); }

/// Draw `text` with its anchor at (x, y): ha in {0 left, 0.5 center, 1 right}, va likewise
/// (0 top, 0.5 middle, 1 bottom); `angle` in radians (counter-clockwise).
void text(cairo_t* cr, const std::string& s, double x, double y, double size, double ha, double va,
          double angle = 0.0) {
  cairo_save(cr);
  cairo_select_font_face(cr, font, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  cairo_font_extents_t fe;
  cairo_font_extents(cr, &fe);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, -angle);
  const double h = fe.ascent + fe.descent;
  cairo_move_to(cr, -ha * e.x_advance - e.x_bearing * 0.0, -va * h + fe.ascent);
  cairo_show_text(cr, s.c_str());
  cairo_restore(cr);
}

/// "Nice" tick positions covering [lo, hi] (steps 1, 2, 2.5, 5 x 10^n), at most ~target.
std::vector<double> nice_ticks(double lo, double hi, int target, double& step) {
  const double span = hi > lo ? hi - lo : std::fabs(hi) + 1.0;
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (span / step <= target) break;
  }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * step; v += step)
    t.push_back(std::fabs(v) < 1e-12 * step ? 0.0 : v);
  return t;
}

/// Tick labels with a common power of ten pulled out (matplotlib's offset text) when the
/// values are large or small; returns the labels and sets `exponent` (0 when none).
std::vector<std::string> tick_labels(const std::vector<double>& ticks, double step, int& exponent) {
  double big = 0;
  for (double v : ticks) big = std::max(big, std::fabs(v));
  exponent = 0;
  if (big > 0 && (big >= 1e4 || big < 1e-3)) exponent = int(std::floor(std::log10(big)));
  const double scale = std::pow(10.0, -exponent);
  const double s = step * scale;
  int decimals = std::max(0, -int(std::floor(std::log10(s) + 1e-9)));
  if (std::fabs(s * std::pow(10.0, decimals) - std::round(s * std::pow(10.0, decimals))) > 1e-6) ++decimals;
  std::vector<std::string> out;
  char buf[64];
  for (double v : ticks) {
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v * scale);
    out.push_back(buf);
  }
  return out;
}

void padded_range(const std::vector<double>& v, double& lo, double& hi) {
  lo = std::numeric_limits<double>::infinity();
  hi = -lo;
  for (double x : v)
    if (std::isfinite(x)) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  if (!std::isfinite(lo)) {
    lo = 0;
    hi = 1;
  }
  if (hi == lo) {
    const double d = lo != 0 ? std::fabs(lo) * 0.05 : 0.5;
    lo -= d;
    hi += d;
  }
  const double pad = 0.05 * (hi - lo);  // matplotlib's default margins
  lo -= pad;
  hi += pad;
}

cairo_status_t to_string_sink(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

void put_u32(std::string& s, std::uint32_t v) {
  for (int i = 3; i >= 0; --i) s.push_back(char((v >> (8 * i)) & 0xff));
}
std::uint32_t get_u32(const std::string& s, size_t p) {
  return (std::uint32_t(std::uint8_t(s[p])) << 24) | (std::uint32_t(std::uint8_t(s[p + 1])) << 16) |
         (std::uint32_t(std::uint8_t(s[p + 2])) << 8) | std::uint32_t(std::uint8_t(s[p + 3]));
}

const char png_signature[] = "\x89PNG\r\n\x1a\n";

/// The PNG of `surface` with a tEXt chunk (keyword `knmf:data`) before IEND, written
/// atomically to `path`.
void write_png(cairo_surface_t* surface, const std::string& path, const std::string& data) {
  std::string png;
  if (cairo_surface_write_to_png_stream(surface, to_string_sink, &png) != CAIRO_STATUS_SUCCESS)
    input_error(path, ": cairo could not encode the PNG");
  KNMF_ASSERT(png.size() > 20 && png.compare(png.size() - 12, 12, std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12)) == 0,
              "cairo's PNG ends with IEND");
  std::string chunk_data = "knmf:data";
  chunk_data.push_back('\0');
  chunk_data += data;
  std::string chunk;
  put_u32(chunk, std::uint32_t(chunk_data.size()));
  std::string typed = "tEXt" + chunk_data;
  chunk += typed;
  put_u32(chunk, std::uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(typed.data()), uInt(typed.size()))));
  png.insert(png.size() - 12, chunk);

  io::AtomicFile out(path);
  out.write(png);
  out.commit();
}

struct Surface {
  cairo_surface_t* s = nullptr;
  cairo_t* cr = nullptr;
  Surface(int w, int h) {
    s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h);
    cr = cairo_create(s);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
  }
  ~Surface() {
    cairo_destroy(cr);
    cairo_surface_destroy(s);
  }
  Surface(const Surface&) = delete;
  Surface& operator=(const Surface&) = delete;
};

void marker(cairo_t* cr, double x, double y, double r, const Rgb& c) {
  cairo_new_sub_path(cr);
  cairo_arc(cr, x, y, r, 0, 2 * M_PI);
  set(cr, c);
  cairo_fill(cr);
}

/// One line of points (x(ks[i]), y(v[i])) with markers, broken at non-finite values; the
/// points drawn (NaN for those left out) go to `pts`.
template <class FX, class FY>
void draw_series(cairo_t* cr, const std::vector<double>& ks, const std::vector<double>& v,
                 const FX& X, const FY& Y, const Rgb& c,
                 std::vector<std::pair<double, double>>& pts) {
  const double lw = pt(1.5), mr = pt(6) / 2;
  cairo_set_line_width(cr, lw);
  set(cr, c);
  bool pen = false;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      pts.emplace_back(std::nan(""), std::nan(""));
      pen = false;
      continue;
    }
    const double px = X(ks[i]), py = Y(v[i]);
    pts.emplace_back(px, py);
    if (pen)
      cairo_line_to(cr, px, py);
    else
      cairo_move_to(cr, px, py);
    pen = true;
  }
  cairo_stroke(cr);
  for (const auto& p : pts)
    if (std::isfinite(p.first)) marker(cr, p.first, p.second, mr, c);
}

/// The k-selection figure's bi-cross-validation panel (below the stability and error
/// panel, the same k axis `X`): the mean relative prediction error per k with bars of one
/// standard deviation, and the k cross-validation chose (`chosen`, 0: none) marked.
constexpr int cv_panel_height = 600;
template <class FX>
void draw_cv_panel(cairo_t* cr, KSelectionPlotLayout& L, const std::vector<KSelectionRow>& rows,
                   int chosen, const FX& X, const std::vector<double>& xt,
                   const std::vector<std::string>& xl) {
  const Rgb green{0.0, 0.5, 0.0};
  L.cv_top = 1000 + 40.0;
  L.cv_bottom = L.height - 165.0;
  std::vector<double> ks, mean, span;
  for (const auto& r : rows) {
    ks.push_back(r.k);
    mean.push_back(r.cv_prediction_error);
    if (std::isfinite(r.cv_prediction_error)) {
      const double sd = std::isfinite(r.cv_prediction_error_sd) ? r.cv_prediction_error_sd : 0.0;
      span.push_back(r.cv_prediction_error - sd);
      span.push_back(r.cv_prediction_error + sd);
    }
  }
  double c0, c1, cstep;
  padded_range(span, c0, c1);
  const auto ct = nice_ticks(c0, c1, 5, cstep);
  int cexp = 0;
  const auto cl = tick_labels(ct, cstep, cexp);
  auto Y = [&](double v) { return L.cv_bottom - (v - c0) / (c1 - c0) * (L.cv_bottom - L.cv_top); };
  cairo_set_line_width(cr, pt(0.8));
  set(cr, grid_gray);
  for (double v : ct) {
    cairo_move_to(cr, L.left, Y(v));
    cairo_line_to(cr, L.right, Y(v));
  }
  cairo_stroke(cr);
  if (chosen > 0) {  // the chosen k: a dashed line across the panel
    const double dash[] = {pt(4), pt(3)};
    set(cr, green);
    cairo_set_line_width(cr, pt(1.2));
    cairo_set_dash(cr, dash, 2, 0);
    L.cv_chosen_x = X(double(chosen));
    cairo_move_to(cr, L.cv_chosen_x, L.cv_top);
    cairo_line_to(cr, L.cv_chosen_x, L.cv_bottom);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    text(cr, "chosen k = " + std::to_string(chosen), L.cv_chosen_x + pt(3), L.cv_top + pt(2),
         pt(10), 0.0, 0.0);
  }
  set(cr, black);
  cairo_set_line_width(cr, pt(1.0));
  for (const auto& r : rows)  // the error bars
    if (std::isfinite(r.cv_prediction_error) && std::isfinite(r.cv_prediction_error_sd)) {
      cairo_move_to(cr, X(r.k), Y(r.cv_prediction_error - r.cv_prediction_error_sd));
      cairo_line_to(cr, X(r.k), Y(r.cv_prediction_error + r.cv_prediction_error_sd));
    }
  cairo_stroke(cr);
  draw_series(cr, ks, mean, X, Y, black, L.cv_points);
  cairo_set_line_width(cr, pt(0.8));
  cairo_rectangle(cr, L.left, L.cv_top, L.right - L.left, L.cv_bottom - L.cv_top);
  cairo_stroke(cr);
  const double tick = pt(3.5), fs = pt(10);
  for (size_t i = 0; i < xt.size(); ++i) {
    cairo_move_to(cr, X(xt[i]), L.cv_bottom);
    cairo_line_to(cr, X(xt[i]), L.cv_bottom + tick);
    cairo_stroke(cr);
    text(cr, xl[i], X(xt[i]), L.cv_bottom + tick + pt(3.5), fs, 0.5, 0.0);
  }
  for (size_t i = 0; i < ct.size(); ++i) {
    cairo_move_to(cr, L.left, Y(ct[i]));
    cairo_line_to(cr, L.left - tick, Y(ct[i]));
    cairo_stroke(cr);
    text(cr, cl[i], L.left - tick - pt(3.5), Y(ct[i]), fs, 1.0, 0.5);
  }
  if (cexp != 0) text(cr, "1e" + std::to_string(cexp), L.left, L.cv_top - pt(4), fs, 0.0, 1.0);
  text(cr, "CV error", 40, (L.cv_top + L.cv_bottom) / 2, pt(15), 0.5, 0.0, M_PI / 2);
}

}  // namespace

KSelectionPlotLayout write_k_selection_plot(const std::string& path,
                                            const std::vector<KSelectionRow>& rows,
                                            int cv_chosen_k) {
  if (rows.empty()) input_error(path, ": no k-selection rows to plot");
  const bool cv = std::any_of(rows.begin(), rows.end(), [](const KSelectionRow& r) {
    return std::isfinite(r.cv_prediction_error);
  });
  KSelectionPlotLayout L;
  L.width = 1500;
  L.height = cv ? 1000 + cv_panel_height : 1000;
  Surface S(L.width, L.height);
  cairo_t* cr = S.cr;
  cairo_set_antialias(cr, CAIRO_ANTIALIAS_GOOD);

  std::vector<double> ks, stab, err;
  for (const auto& r : rows) {
    ks.push_back(r.k);
    stab.push_back(r.silhouette);
    err.push_back(r.prediction_error);
  }
  double x0, x1, s0, s1, e0, e1;
  padded_range(ks, x0, x1);
  padded_range(stab, s0, s1);
  padded_range(err, e0, e1);
  double xstep, sstep, estep;
  auto xt = nice_ticks(x0, x1, 8, xstep);
  if (xstep < 1.0) {  // k is an integer
    xt.clear();
    for (double v = std::ceil(x0); v <= x1; v += 1.0) xt.push_back(v);
    xstep = 1.0;
  }
  auto st = nice_ticks(s0, s1, 6, sstep);
  auto et = nice_ticks(e0, e1, 6, estep);
  int sexp = 0, eexp = 0, xexp = 0;
  auto xl = tick_labels(xt, xstep, xexp);
  auto sl = tick_labels(st, sstep, sexp);
  auto el = tick_labels(et, estep, eexp);

  L.left = 215;
  L.right = L.width - 245.0;
  L.top = 70;
  L.bottom = 1000 - 165.0;
  auto X = [&](double v) { return L.left + (v - x0) / (x1 - x0) * (L.right - L.left); };
  auto YS = [&](double v) { return L.bottom - (v - s0) / (s1 - s0) * (L.bottom - L.top); };
  auto YE = [&](double v) { return L.bottom - (v - e0) / (e1 - e0) * (L.bottom - L.top); };

  // grid (on the stability axis' ticks, as ax1.grid does)
  cairo_set_line_width(cr, pt(0.8));
  set(cr, grid_gray);
  for (double v : xt) {
    cairo_move_to(cr, X(v), L.top);
    cairo_line_to(cr, X(v), L.bottom);
  }
  for (double v : st) {
    cairo_move_to(cr, L.left, YS(v));
    cairo_line_to(cr, L.right, YS(v));
  }
  cairo_stroke(cr);

  // data: error (red, right axis), stability (blue, left axis)
  draw_series(cr, ks, err, X, YE, red, L.error_points);
  draw_series(cr, ks, stab, X, YS, blue, L.stability_points);

  // frame and ticks
  set(cr, black);
  cairo_set_line_width(cr, pt(0.8));
  cairo_rectangle(cr, L.left, L.top, L.right - L.left, L.bottom - L.top);
  cairo_stroke(cr);
  const double tick = pt(3.5), fs = pt(10), ls = pt(15);
  for (size_t i = 0; i < xt.size(); ++i) {
    cairo_move_to(cr, X(xt[i]), L.bottom);
    cairo_line_to(cr, X(xt[i]), L.bottom + tick);
    cairo_stroke(cr);
    text(cr, xl[i], X(xt[i]), L.bottom + tick + pt(3.5), fs, 0.5, 0.0);
  }
  set(cr, blue);
  for (size_t i = 0; i < st.size(); ++i) {
    cairo_move_to(cr, L.left, YS(st[i]));
    cairo_line_to(cr, L.left - tick, YS(st[i]));
    cairo_stroke(cr);
    text(cr, sl[i], L.left - tick - pt(3.5), YS(st[i]), fs, 1.0, 0.5);
  }
  set(cr, red);
  for (size_t i = 0; i < et.size(); ++i) {
    cairo_move_to(cr, L.right, YE(et[i]));
    cairo_line_to(cr, L.right + tick, YE(et[i]));
    cairo_stroke(cr);
    text(cr, el[i], L.right + tick + pt(3.5), YE(et[i]), fs, 0.0, 0.5);
  }
  if (eexp != 0) text(cr, "1e" + std::to_string(eexp), L.right, L.top - pt(4), fs, 1.0, 1.0);
  if (sexp != 0) {
    set(cr, blue);
    text(cr, "1e" + std::to_string(sexp), L.left, L.top - pt(4), fs, 0.0, 1.0);
  }
  // axis labels
  set(cr, blue);
  text(cr, "Stability", 40, (L.top + L.bottom) / 2, ls, 0.5, 0.0, M_PI / 2);
  set(cr, red);
  text(cr, "Error", L.width - 40.0, (L.top + L.bottom) / 2, ls, 0.5, 1.0, M_PI / 2);
  set(cr, black);
  text(cr, "Number of Components", (L.left + L.right) / 2, L.height - 30.0, ls, 0.5, 1.0);
  if (cv) draw_cv_panel(cr, L, rows, cv_chosen_k, X, xt, xl);

  std::ostringstream data;
  data << "k\tlocal_density_threshold\tsilhouette\tprediction_error"
       << (cv ? "\tcv_prediction_error\tcv_prediction_error_sd\n" : "\n");
  for (const auto& r : rows) {
    data << r.k << '\t' << io::format_float_repr(r.local_density_threshold) << '\t'
         << io::format_float_repr(r.silhouette) << '\t' << io::format_float_repr(r.prediction_error);
    if (cv)
      data << '\t' << io::format_float_repr(r.cv_prediction_error) << '\t'
           << io::format_float_repr(r.cv_prediction_error_sd);
    data << '\n';
  }
  cairo_surface_flush(S.s);
  write_png(S.s, path, data.str());
  return L;
}

// ---- clustering figure ------------------------------------------------------------------------

namespace {

/// viridis at 9 evenly spaced points (matplotlib's table, every 32nd entry).
const Rgb viridis_table[] = {{0.267004, 0.004874, 0.329415}, {0.282623, 0.140926, 0.457517},
                             {0.253935, 0.265254, 0.529983}, {0.206756, 0.371758, 0.553117},
                             {0.163625, 0.471133, 0.558148}, {0.127568, 0.566949, 0.550556},
                             {0.134692, 0.658636, 0.517649}, {0.266941, 0.748751, 0.440573},
                             {0.477504, 0.821444, 0.318195}, {0.741388, 0.873449, 0.149561},
                             {0.993248, 0.906157, 0.143936}};

Rgb viridis(double t) {
  t = std::clamp(t, 0.0, 1.0) * 10.0;
  const int i = std::min(int(t), 9);
  const double f = t - i;
  const Rgb& a = viridis_table[i];
  const Rgb& b = viridis_table[i + 1];
  return {a.r + f * (b.r - a.r), a.g + f * (b.g - a.g), a.b + f * (b.b - a.b)};
}

/// A qualitative "Spectral"-like colour for cluster c of k.
Rgb spectral(int c, int k) {
  const Rgb pts[] = {{0.62, 0.00, 0.26}, {0.96, 0.43, 0.26}, {1.00, 0.88, 0.55},
                     {0.90, 0.96, 0.60}, {0.40, 0.76, 0.65}, {0.37, 0.31, 0.64}};
  const double t = k > 1 ? double(c) / double(k - 1) * 5.0 : 0.0;
  const int i = std::min(int(t), 4);
  const double f = t - i;
  return {pts[i].r + f * (pts[i + 1].r - pts[i].r), pts[i].g + f * (pts[i + 1].g - pts[i].g),
          pts[i].b + f * (pts[i + 1].b - pts[i].b)};
}

void fill_rect(cairo_t* cr, double x, double y, double w, double h, const Rgb& c) {
  set(cr, c);
  cairo_rectangle(cr, x, y, w, h);
  cairo_fill(cr);
}

}  // namespace

std::vector<size_type> clustering_order(const HostRows& d, const std::vector<int>& labels) {
  const size_type m = size_type(labels.size());
  KNMF_ASSERT(d.rows == m && d.cols == m, "distances are m x m");
  int k = 0;
  for (int l : labels) k = std::max(k, l + 1);
  std::vector<size_type> order;
  for (int c = 0; c < k; ++c) {
    std::vector<size_type> mem;
    for (size_type i = 0; i < m; ++i)
      if (labels[size_t(i)] == c) mem.push_back(i);
    if (mem.empty()) continue;
    size_type medoid = mem[0];
    double best = std::numeric_limits<double>::infinity();
    for (size_type a : mem) {
      double s = 0;
      for (size_type b : mem) s += d.row(a)[b];
      if (s < best) {
        best = s;
        medoid = a;
      }
    }
    std::stable_sort(mem.begin(), mem.end(),
                     [&](size_type a, size_type b) { return d.row(medoid)[a] < d.row(medoid)[b]; });
    order.insert(order.end(), mem.begin(), mem.end());
  }
  return order;
}

void write_clustering_plot(const std::string& path, const ClusteringFigure& fig) {
  const size_type m = size_type(fig.labels.size());
  if (m == 0) input_error(path, ": no clustered spectra to plot");
  const auto order = clustering_order(fig.distances, fig.labels);
  const int W = int(10.5 * dpi), H = int(9.5 * dpi);
  Surface S(W, H);
  cairo_t* cr = S.cr;
  // cNMF's grid: widths 0.5, 9, 0.5, 4, 1; heights 0.5, 9; inside [0.01, 0.98]
  const double gx0 = 0.01 * W, gw = 0.97 * W, gy0 = 0.02 * H, gh = 0.97 * H;
  const double cw = gw / 15.0, rh = gh / 9.5;
  const double hx = gx0 + 0.5 * cw, hy = gy0 + 0.5 * rh, hs_w = 9 * cw, hs_h = 9 * rh;

  // heatmap (down-sampled by block averages when m exceeds the pixels)
  const int px = int(std::min<size_type>(m, size_type(std::min(hs_w, hs_h))));
  double vmin = std::numeric_limits<double>::infinity(), vmax = -vmin;
  for (size_type a = 0; a < m; ++a)
    for (size_type b = 0; b < m; ++b) {
      vmin = std::min(vmin, fig.distances.row(a)[b]);
      vmax = std::max(vmax, fig.distances.row(a)[b]);
    }
  const double span = vmax > vmin ? vmax - vmin : 1.0;
  cairo_surface_t* img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, px, px);
  cairo_surface_flush(img);
  unsigned char* data = cairo_image_surface_get_data(img);
  const int stride = cairo_image_surface_get_stride(img);
  for (int i = 0; i < px; ++i)
    for (int j = 0; j < px; ++j) {
      const size_type a0 = size_type(i) * m / px, a1 = std::max(a0 + 1, size_type(i + 1) * m / px);
      const size_type b0 = size_type(j) * m / px, b1 = std::max(b0 + 1, size_type(j + 1) * m / px);
      double s = 0;
      for (size_type a = a0; a < a1; ++a)
        for (size_type b = b0; b < b1; ++b) s += fig.distances.row(order[size_t(a)])[order[size_t(b)]];
      const Rgb c = viridis((s / double((a1 - a0) * (b1 - b0)) - vmin) / span);
      auto* p = reinterpret_cast<std::uint32_t*>(data + i * stride) + j;
      *p = (std::uint32_t(c.r * 255 + 0.5) << 16) | (std::uint32_t(c.g * 255 + 0.5) << 8) |
           std::uint32_t(c.b * 255 + 0.5);
    }
  cairo_surface_mark_dirty(img);
  cairo_save(cr);
  cairo_translate(cr, hx, hy);
  cairo_scale(cr, hs_w / px, hs_h / px);
  cairo_set_source_surface(cr, img, 0, 0);
  cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
  cairo_paint(cr);
  cairo_restore(cr);
  cairo_surface_destroy(img);
  // cluster bars (left and top)
  for (size_type a = 0; a < m; ++a) {
    const Rgb c = spectral(fig.labels[size_t(order[size_t(a)])], fig.k);
    const double t0 = double(a) / double(m), t1 = double(a + 1) / double(m);
    fill_rect(cr, gx0, hy + t0 * hs_h, 0.5 * cw, (t1 - t0) * hs_h + 0.5, c);
    fill_rect(cr, hx + t0 * hs_w, gy0, (t1 - t0) * hs_w + 0.5, 0.5 * rh, c);
  }
  set(cr, black);
  cairo_set_line_width(cr, pt(0.8));
  cairo_rectangle(cr, hx, hy, hs_w, hs_h);
  cairo_stroke(cr);

  // local density histogram (bins of np.linspace(0, 1, 50))
  const double bx = gx0 + 10.5 * cw, bw = 4 * cw, by = hy + 0.35 * rh, bh = 2.3 * rh;
  std::vector<int> counts(49, 0);
  size_type removed = 0;
  for (double v : fig.local_density) {
    if (!(v < fig.density_threshold)) ++removed;
    if (v >= 0 && v <= 1) counts[size_t(std::min(48, int(v * 49.0)))]++;
  }
  const int cmax = std::max(1, *std::max_element(counts.begin(), counts.end()));
  for (int b = 0; b < 49; ++b) {
    const double h = bh * counts[size_t(b)] / (cmax * 1.05);
    fill_rect(cr, bx + bw * b / 49.0, by + bh - h, bw / 49.0, h, {0.12, 0.47, 0.71});
  }
  set(cr, black);
  cairo_rectangle(cr, bx, by, bw, bh);
  cairo_stroke(cr);
  const double fs = pt(10);
  text(cr, "Local density histogram", bx + bw / 2, by - pt(4), pt(12), 0.5, 1.0);
  if (fig.density_threshold < 1.0) {
    const double tx = bx + bw * fig.density_threshold;
    const double dash[] = {pt(3.7), pt(1.6)};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, tx, by);
    cairo_line_to(cr, tx, by + bh);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    text(cr, "filtering", tx + 0.02 * bw, by + pt(6), fs, 0.0, 0.0);
    text(cr, "threshold", tx + 0.02 * bw, by + pt(6) + fs * 1.2, fs, 0.0, 0.0);
  }
  for (double v : {0.0, 0.2, 0.4, 0.6, 0.8, 1.0}) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    text(cr, buf, bx + bw * v, by + bh + pt(3), fs, 0.5, 0.0);
  }
  const size_type total = size_type(fig.local_density.size());
  char line[160];
  text(cr, "Mean distance to k nearest neighbors", bx + bw / 2, by + bh + pt(18), fs, 0.5, 0.0);
  std::snprintf(line, sizeof line, "%lld/%lld (%.0f%%) spectra above threshold", (long long)removed,
                (long long)total, total > 0 ? 100.0 * double(removed) / double(total) : 0.0);
  text(cr, line, bx + bw / 2, by + bh + pt(40), fs, 0.5, 0.0);
  text(cr, "were removed prior to clustering", bx + bw / 2, by + bh + pt(40) + fs * 1.2, fs, 0.5, 0.0);

  // colour bar
  const double cy = hy + 4.9 * rh, ch = 0.25 * rh;
  for (int i = 0; i < 256; ++i) fill_rect(cr, bx + bw * i / 256.0, cy, bw / 256.0 + 0.5, ch, viridis(i / 255.0));
  set(cr, black);
  cairo_rectangle(cr, bx, cy, bw, ch);
  cairo_stroke(cr);
  text(cr, "Euclidean Distance", bx + bw / 2, cy - pt(4), pt(12), 0.5, 1.0);
  for (int i = 0; i < 3; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", vmin + span * i / 2.0);
    text(cr, buf, bx + bw * i / 2.0, cy + ch + pt(3), fs, 0.5, 0.0);
  }

  std::ostringstream meta;
  meta << "k\t" << fig.k << "\nlocal_density_threshold\t" << io::format_float_repr(fig.density_threshold)
       << "\nclustered\t" << m << "\nremoved\t" << removed << "\ntotal\t" << total << "\n";
  cairo_surface_flush(S.s);
  write_png(S.s, path, meta.str());
}

std::vector<std::pair<std::string, std::string>> png_text_chunks(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) input_error(path, ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  if (s.size() < 8 || s.compare(0, 8, png_signature, 8) != 0) input_error(path, ": not a PNG file");
  std::vector<std::pair<std::string, std::string>> out;
  size_t p = 8;
  while (p + 12 <= s.size()) {
    const std::uint32_t len = get_u32(s, p);
    if (p + 12 + len > s.size()) input_error(path, ": truncated PNG chunk at byte ", p);
    const std::string type = s.substr(p + 4, 4);
    if (type == "tEXt") {
      const std::string body = s.substr(p + 8, len);
      const size_t z = body.find('\0');
      if (z != std::string::npos) out.emplace_back(body.substr(0, z), body.substr(z + 1));
    }
    if (type == "IEND") break;
    p += 12 + len;
  }
  return out;
}

}  // namespace knmf::consensus
