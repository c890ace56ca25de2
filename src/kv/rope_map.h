// Where a cache's keys sit in RoPE positions, as a function of the token
// index they were made at (HeadStore::pos). Until a conversation outgrows
// the context length the two are equal. A re-base (Session::MakeRoom) then
// keeps the newest positions' distances and squashes everything older into
// a short span, re-rotating the keys to match: the held entries and the
// tokens to come fit the context again, relative distances within the
// recent part stay exact, older ones shrink (positional interpolation of the
// old part, as llama.cpp's context shift slides the kept tail down, but no
// entry is dropped). Policies keep seeing token indices; only the rotation
// of the keys and of new tokens follows this map.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kvtrim/status.h"

namespace kvtrim::kv {

class RopeMap {
 public:
  struct Point {
    double x = 0;  // token index
    double y = 0;  // its RoPE position
  };

  // The RoPE position of token index p: piecewise linear through the
  // points, slope 1 after the last (the identity with none).
  double At(double p) const;
  // Token index minus RoPE position of every token after the last point
  // (new tokens rotate at index - shift).
  int64_t shift() const { return shift_; }
  bool identity() const { return points_.empty(); }
  const std::vector<Point>& points() const { return points_; }

  // The map after a re-base of a cache that has seen `length` tokens: its
  // newest `recent` RoPE positions keep their distances, every older one is
  // scaled into [0, old_span). The new RoPE length is old_span + recent.
  // Requires 0 < recent, 0 < old_span and old_span + recent < the RoPE
  // length now (length - shift()).
  Expected<RopeMap> Squashed(int64_t length, int64_t recent, int64_t old_span) const;

  // A map read back (a context file): points increasing in x and y, from
  // (0, 0), within [0, length]; the shift is length's distance to its RoPE
  // position, a whole number in [0, length].
  static Expected<RopeMap> FromPoints(std::vector<Point> points, int64_t length);

 private:
  std::vector<Point> points_;  // empty: identity
  int64_t shift_ = 0;
};

}  // namespace kvtrim::kv
