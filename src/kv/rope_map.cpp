#include "kv/rope_map.h"

#include <cmath>

namespace kvtrim::kv {

double RopeMap::At(double p) const {
  if (points_.empty()) return p;
  if (p >= points_.back().x) return points_.back().y + (p - points_.back().x);
  size_t i = 1;
  while (i < points_.size() && points_[i].x <= p) ++i;  // a handful of points: one per re-base
  const Point& a = points_[i - 1];
  const Point& b = points_[i];
  if (p <= a.x) return a.y;
  return a.y + (b.y - a.y) * (p - a.x) / (b.x - a.x);
}

Expected<RopeMap> RopeMap::Squashed(int64_t length, int64_t recent, int64_t old_span) const {
  const int64_t rope_len = length - shift_;
  if (recent <= 0 || old_span <= 0 || old_span + recent >= rope_len)
    return MakeError("a re-base keeps " + std::to_string(recent) + " recent positions and squashes the rest into " +
                     std::to_string(old_span) + ": it must leave fewer than the " + std::to_string(rope_len) +
                     " positions held");
  // s(y): positions below b = rope_len - recent scaled by old_span / b,
  // those above moved down by b - old_span (continuous at b).
  const double b = static_cast<double>(rope_len - recent);
  auto s = [&](double y) { return y <= b ? y * (static_cast<double>(old_span) / b) : y - (b - static_cast<double>(old_span)); };
  std::vector<Point> in = points_;
  if (in.empty()) in.push_back({0, 0});
  // The token index whose RoPE position is b: in the tail when b lies past
  // the last point, else between two points.
  double xb = 0;
  if (b >= in.back().y) {
    xb = in.back().x + (b - in.back().y);
  } else {
    size_t i = 1;
    while (in[i].y < b) ++i;
    xb = in[i - 1].x + (in[i].x - in[i - 1].x) * (b - in[i - 1].y) / (in[i].y - in[i - 1].y);
  }
  RopeMap m;
  bool placed = false;
  for (const Point& p : in) {
    if (!placed && p.x >= xb) {
      if (p.x > xb) m.points_.push_back({xb, static_cast<double>(old_span)});
      placed = true;
    }
    m.points_.push_back({p.x, p.x == xb ? static_cast<double>(old_span) : s(p.y)});
  }
  if (!placed) m.points_.push_back({xb, static_cast<double>(old_span)});
  m.shift_ = length - (old_span + recent);
  return m;
}

Expected<RopeMap> RopeMap::FromPoints(std::vector<Point> points, int64_t length) {
  RopeMap m;
  if (points.empty()) return m;
  auto bad = [](const std::string& why) { return MakeError("RoPE position map: " + why); };
  if (points.front().x != 0 || points.front().y != 0) return bad("it must start at (0, 0)");
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    if (!std::isfinite(p.x) || !std::isfinite(p.y) || p.x < 0 || p.x > static_cast<double>(length) || p.y < 0)
      return bad("a point lies outside [0, " + std::to_string(length) + "]");
    if (i > 0 && (p.x <= points[i - 1].x || p.y <= points[i - 1].y)) return bad("its points must increase");
  }
  const double shift = points.back().x - points.back().y;
  if (shift < 0 || shift > static_cast<double>(length) || std::fabs(shift - std::round(shift)) > 1e-6)
    return bad("its last point must lie a whole number of positions below its token index");
  m.points_ = std::move(points);
  m.shift_ = static_cast<int64_t>(std::llround(shift));
  return m;
}

}  // namespace kvtrim::kv
